"""Shared parts of the middleware tests: the real checkpointer on the embedded Valkey, the real
``ChatOpenAI`` client built by :mod:`drydock.models` against the scripted model server, and
recording doubles of the channel-facing protocols."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from langchain_core.runnables import RunnableConfig
from langchain_openai import ChatOpenAI
from langgraph_checkpoint_plainredis import AsyncRedisSaver
from pydantic import SecretStr

from drydock.channels.run_status import RunStatus
from drydock.checkpoints import open_checkpointer
from drydock.config import ModelSettings, Settings
from drydock.infra.redis import Keys
from drydock.models import Models
from tests.fakes.openai_server import ScriptedModelServer


@pytest.fixture
async def checkpointer(settings: Settings, keys: Keys) -> AsyncIterator[AsyncRedisSaver]:
    async with open_checkpointer(settings.redis.model_copy(update={"key_prefix": keys.prefix})) as saver:
        yield saver


def chat_model(server: ScriptedModelServer, model: str = "gpt-5.1", *, max_retries: int = 0) -> ChatOpenAI:
    """The client a run would get for ``model``, pointed at ``server``."""
    models = Models(
        ModelSettings(base_url=server.base_url, api_key=SecretStr("test-key"), default=model, max_retries=max_retries)
    )
    return models.chat_model(models.default)


def run_config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


class RecordingStatus:
    """A status reporter that remembers what it was asked to show; ``fail`` makes it raise."""

    def __init__(self, *, fail: bool = False) -> None:
        self.shown: list[RunStatus] = []
        self.details: list[str] = []
        self.fail = fail

    async def show(self, status: RunStatus, detail: str = "") -> None:
        self.shown.append(status)
        self.details.append(detail)
        if self.fail:
            raise ConnectionError("the channel is down")


class RecordingNotifier:
    """A source notifier that remembers the notices; ``fail`` makes it raise."""

    def __init__(self, *, fail: bool = False) -> None:
        self.notices: list[str] = []
        self.fail = fail

    async def notify(self, text: str) -> None:
        self.notices.append(text)
        if self.fail:
            raise ConnectionError("the channel is down")
