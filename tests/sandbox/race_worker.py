"""A worker process for the race test: waits for a go signal in Redis, then ensures the sandbox
of one thread and prints what it got as JSON.

``python -m tests.sandbox.race_worker REDIS_URL KEY_PREFIX THREAD_ID SANDBOX_SETTINGS_JSON GO_KEY CRYPTO_KEY``
"""

from __future__ import annotations

import asyncio
import builtins
import json
import sys
from collections.abc import Mapping

from redis.asyncio import Redis

from drydock.config import SandboxSettings
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.sandbox.credentials import NoProxy
from drydock.sandbox.handle import SandboxHandle
from drydock.sandbox.lifecycle import SandboxManager
from drydock.sandbox.providers.local import LocalProvider
from drydock.sandbox.records import SandboxStore
from drydock.threads.metadata import ThreadMetadataStore


class CountingProvider(LocalProvider):
    creations = 0

    async def create(self, thread_id: str, *, labels: Mapping[str, str] | None = None) -> SandboxHandle:
        self.creations += 1
        return await super().create(thread_id, labels=labels)


async def main(url: str, prefix: str, thread_id: str, raw_settings: str, go_key: str, crypto_key: str) -> None:
    redis = Redis.from_url(url, decode_responses=True)
    keys = Keys(prefix)
    settings = SandboxSettings.model_validate_json(raw_settings)
    records = SandboxStore(redis, keys, ServerKeys([crypto_key]))
    provider = CountingProvider(settings, records)
    manager = SandboxManager(
        provider=provider,
        records=records,
        metadata=ThreadMetadataStore(redis, keys),
        credentials=NoProxy(),
        redis=redis,
        keys=keys,
        settings=settings,
    )
    await redis.rpush(f"{go_key}:ready", "1")
    await redis.blpop([go_key], timeout=30)
    backend = await manager.ensure_sandbox(thread_id)
    builtins.print(json.dumps({"sandbox_id": backend.id, "creations": provider.creations}), flush=True)
    await manager.aclose()
    await redis.aclose()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
