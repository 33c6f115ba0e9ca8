"""Sandbox figures on the local provider: cold create until the daemon answers health (in
bubblewrap with its own network namespace and the proxy relay, and unisolated), the round trip
of ``true`` through the daemon, and a warm ``ensure_sandbox`` (cache hit, health
check, grant refresh with :class:`~drydock.sandbox.credentials.NoProxy`, git identity).

``pdm run python -m bench sandbox``
"""

from __future__ import annotations

import tempfile
import uuid

from cryptography.fernet import Fernet

from bench.harness import measure, report
from drydock.config import SandboxSettings, load_settings
from drydock.infra.embedded import embedded_infrastructure
from drydock.infra.redis import Keys, connect_redis
from drydock.infra.server_keys import ServerKeys
from drydock.roles import Role
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.credentials import NoProxy
from drydock.sandbox.handle import SandboxHandle
from drydock.sandbox.lifecycle import SandboxManager
from drydock.sandbox.providers.local import LocalProvider
from drydock.sandbox.records import SandboxRecords
from drydock.threads.metadata import ThreadMetadataStore


async def main() -> None:
    async with embedded_infrastructure() as urls:
        settings = load_settings(
            nats={"url": urls.nats}, redis={"url": urls.redis}, crypto={"keys": [Fernet.generate_key().decode()]}
        )
        redis = await connect_redis(settings.redis)
        keys = Keys(prefix=f"bench-{uuid.uuid4().hex[:8]}")
        records = SandboxRecords(redis, keys, ServerKeys.from_settings(settings.crypto))
        with tempfile.TemporaryDirectory(prefix="drydock-bench-") as root:
            for bubblewrap in (True, False):
                sandbox_settings = SandboxSettings(
                    local_root=root, local_bubblewrap=bubblewrap, local_allow_unisolated=not bubblewrap
                )
                provider = LocalProvider(sandbox_settings, records)
                created: list[SandboxHandle] = []

                async def create(provider: LocalProvider = provider, created: list[SandboxHandle] = created) -> None:
                    created.append(await provider.create("bench"))

                report(
                    await measure(f"local cold create ({provider.isolation})", create, count=15, warmup=1),
                    target_p50_ms=1000,
                )
                for handle in created:
                    await provider.delete(handle.id)

            sandbox_settings = SandboxSettings(local_root=root)
            provider = LocalProvider(sandbox_settings, records)
            handle = await provider.create("bench")
            backend = SandboxBackend(handle)
            report(
                await measure(
                    f"exec round trip of true ({provider.isolation})", lambda: backend.run("true"), count=500
                ),
                target_p50_ms=10,
            )
            await backend.aclose()
            await provider.delete(handle.id)

            metadata = ThreadMetadataStore(redis, keys)
            thread_id = str(uuid.uuid4())
            await metadata.create(thread_id, kind=Role.CODER)
            manager = SandboxManager(
                provider=provider,
                records=records,
                metadata=metadata,
                credentials=NoProxy(),
                redis=redis,
                keys=keys,
                settings=sandbox_settings,
            )
            await manager.ensure_sandbox(thread_id)
            report(
                await measure("warm ensure_sandbox (NoProxy)", lambda: manager.ensure_sandbox(thread_id), count=300),
                target_p50_ms=10,
            )
            await manager.aclose()
            for leftover in await provider.list():
                await provider.delete(leftover.id)
        await redis.aclose()
