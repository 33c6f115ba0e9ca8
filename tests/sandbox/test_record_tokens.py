"""The sandbox record in Redis holds no usable daemon token, and a record written or changed
without the server's key is not used: the test holds the store, as if it had leaked."""

from __future__ import annotations

import uuid
from typing import Any, cast

import httpx
from cryptography.fernet import Fernet
from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.sandbox.daemon import protocol
from drydock.sandbox.providers.local import LocalProvider
from drydock.sandbox.records import SandboxStore


async def _status(base_url: str, token: str) -> int:
    async with httpx.AsyncClient(base_url=base_url, trust_env=False) as client:
        return (await client.get(protocol.HEALTH, headers={"Authorization": f"Bearer {token}"})).status_code


class TestDaemonTokens:
    async def test_nothing_in_the_record_opens_the_daemon(
        self, local_provider: LocalProvider, redis: Redis, keys: Keys
    ) -> None:
        handle = await local_provider.create(str(uuid.uuid4()))
        record = cast(dict[str, str], await redis.hgetall(keys.sandbox(handle.id)))
        assert record["id"] == handle.id
        assert handle.token not in str(record)
        for value in record.values():
            assert await _status(handle.base_url, value) == 401
        assert await _status(handle.base_url, handle.token) == 200

    async def test_another_worker_recomputes_the_token_from_the_record(
        self, local_provider: LocalProvider, redis: Redis, keys: Keys, server_keys: ServerKeys
    ) -> None:
        handle = await local_provider.create(str(uuid.uuid4()))
        elsewhere = await SandboxStore(redis, keys, server_keys).get(handle.id)
        assert elsewhere is not None
        assert elsewhere.token == handle.token
        assert await _status(elsewhere.base_url, elsewhere.token) == 200

    async def test_a_rotated_key_ring_still_reaches_older_sandboxes(
        self, local_provider: LocalProvider, redis: Redis, keys: Keys, crypto_key: str
    ) -> None:
        handle = await local_provider.create(str(uuid.uuid4()))
        rotated = SandboxStore(redis, keys, ServerKeys([Fernet.generate_key().decode(), crypto_key]))
        found = await rotated.get(handle.id)
        assert found is not None
        assert await _status(found.base_url, found.token) == 200


class TestTamperedRecords:
    async def test_a_base_url_pointed_elsewhere_is_ignored(
        self, local_provider: LocalProvider, records: SandboxStore, redis: Redis, keys: Keys
    ) -> None:
        handle = await local_provider.create(str(uuid.uuid4()))
        # A worker would send the derived token to whoever listens there.
        await redis.hset(keys.sandbox(handle.id), "base_url", "http://127.0.0.1:9")
        assert await records.get(handle.id) is None
        await records.put(handle)

    async def test_a_record_copied_under_another_sandbox_is_ignored(
        self, local_provider: LocalProvider, records: SandboxStore, redis: Redis, keys: Keys
    ) -> None:
        handle = await local_provider.create(str(uuid.uuid4()))
        record = cast(dict[Any, str], await redis.hgetall(keys.sandbox(handle.id)))
        await redis.hset(keys.sandbox("sbx-other"), mapping=record)
        assert await records.get("sbx-other") is None

    async def test_a_record_written_without_the_key_is_ignored(
        self, local_provider: LocalProvider, redis: Redis, keys: Keys, server_keys: ServerKeys
    ) -> None:
        handle = await local_provider.create(str(uuid.uuid4()))
        forger = SandboxStore(redis, keys, ServerKeys([Fernet.generate_key().decode()]))
        forged = handle.__class__(**{**handle.__dict__, "token": forger.daemon_token(handle.id)})
        await forger.put(forged)
        genuine = SandboxStore(redis, keys, server_keys)
        assert await genuine.get(handle.id) is None
        await genuine.put(handle)
