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
    ``restore()`` ends the loss. For a thread's first run: a task's writes are kept or lost by
    the step of the checkpoint they belong to, which is known once that checkpoint is put."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, saver: AsyncRedisSaver, step: int) -> None:
        self._monkeypatch = monkeypatch
        put, put_writes = saver.aput, saver.aput_writes
        steps: dict[str, int] = {}
        # LangGraph saves writes and checkpoints in background tasks, chaining only the
        # checkpoints: a slow save of one checkpoint lets later steps' writes arrive before it.
        held: dict[str, list[tuple[RunnableConfig, Sequence[tuple[str, Any]], str, str]]] = {}

        async def aput(
            config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, versions: ChannelVersions
        ) -> RunnableConfig:
            at = steps[checkpoint["id"]] = metadata.get("step", -1)
            waiting = held.pop(checkpoint["id"], [])
            if at > step:
                return {"configurable": {**config["configurable"], "checkpoint_id": checkpoint["id"]}}
            stored = await put(config, checkpoint, metadata, versions)
            if at < step:
                for writes in waiting:
                    await put_writes(*writes)
            return stored

        async def aput_writes(
            config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
        ) -> None:
            checkpoint_id = config["configurable"]["checkpoint_id"]
            if checkpoint_id not in steps:
                held.setdefault(checkpoint_id, []).append((config, writes, task_id, task_path))
            elif steps[checkpoint_id] < step:
                await put_writes(config, writes, task_id, task_path)

        monkeypatch.setattr(saver, "aput", aput)
        monkeypatch.setattr(saver, "aput_writes", aput_writes)

    def restore(self) -> None:
        self._monkeypatch.undo()
