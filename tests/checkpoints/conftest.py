"""A checkpointer under a key prefix of its own per test, on the session's embedded Valkey."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from langgraph_checkpoint_plainredis import AsyncRedisSaver

from drydock.checkpoints import open_checkpointer
from drydock.config import Settings
from drydock.infra.redis import Keys


@pytest.fixture
async def checkpointer(settings: Settings, keys: Keys) -> AsyncIterator[AsyncRedisSaver]:
    async with open_checkpointer(settings.redis.model_copy(update={"key_prefix": keys.prefix})) as saver:
        yield saver
