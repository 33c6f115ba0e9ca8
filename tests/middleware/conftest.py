"""Shared parts of the middleware tests: the real checkpointer on the embedded Valkey, the real
``ChatOpenAI`` client built by :mod:`drydock.models` against the scripted model server, and
recording doubles of the channel-facing protocols."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
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


class CheckpointLoss:
    """Makes ``saver`` forget every write after its checkpoint of graph step ``step``, as a store
    that failed (or a worker that died) before the later steps' checkpoints were written: the
    run goes on in memory, and the next run of the thread resumes from step ``step``.
    ``restore()`` ends the loss."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, saver: AsyncRedisSaver, step: int) -> None:
        self._monkeypatch = monkeypatch
        self.losing = False
        put, put_writes = saver.aput, saver.aput_writes

        async def aput(
            config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, versions: ChannelVersions
        ) -> RunnableConfig:
            if self.losing:
                return {"configurable": {**config["configurable"], "checkpoint_id": checkpoint["id"]}}
            stored = await put(config, checkpoint, metadata, versions)
            self.losing = metadata.get("step", -1) >= step
            return stored

        async def aput_writes(
            config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
        ) -> None:
            if not self.losing:
                await put_writes(config, writes, task_id, task_path)

        monkeypatch.setattr(saver, "aput", aput)
        monkeypatch.setattr(saver, "aput_writes", aput_writes)

    def restore(self) -> None:
        self.losing = False
        self._monkeypatch.undo()
