"""A checkpointer under a key prefix of its own per test, on the session's embedded Valkey."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from drydock.checkpoints import DrydockRedisSaver, open_checkpointer
from drydock.config import Settings
from drydock.infra.redis import Keys


@pytest.fixture
async def checkpointer(settings: Settings, keys: Keys) -> AsyncIterator[DrydockRedisSaver]:
    async with open_checkpointer(settings.redis.model_copy(update={"key_prefix": keys.prefix})) as saver:
        assert isinstance(saver, DrydockRedisSaver)
        yield saver
