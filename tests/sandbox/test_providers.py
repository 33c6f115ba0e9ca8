"""The provider factory map, the sandbox settings, and wiring a manager from a runtime."""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import timedelta

import pytest
from nats.aio.client import Client as NatsClient
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.config import ConfigError, SandboxSettings, Settings, load_settings
from drydock.infra.redis import Keys
from drydock.runtime import Runtime
from drydock.sandbox import providers
from drydock.sandbox.credentials import NoProxy
from drydock.sandbox.errors import UnknownProvider
from drydock.sandbox.lifecycle import SandboxManager
from drydock.sandbox.provider import SandboxProvider
from drydock.sandbox.providers import PROVIDERS, create_provider
from drydock.sandbox.providers.local import LocalProvider
from drydock.sandbox.records import SandboxStore
from tests.sandbox.grants import GrantLedger
from tests.waiting import eventually


def test_the_factory_map_builds_the_configured_provider(
    records: SandboxStore, sandbox_settings: SandboxSettings
) -> None:
    assert "local" in PROVIDERS
    provider = create_provider(Settings(sandbox=sandbox_settings), records)
    assert isinstance(provider, LocalProvider)
    assert provider.name == "local"


def test_an_unknown_provider_is_named_in_the_error(records: SandboxStore) -> None:
    with pytest.raises(UnknownProvider, match=r"'docker'.*DRYDOCK_SANDBOX_PROVIDER.*local"):
        create_provider(Settings(sandbox=SandboxSettings(provider="docker")), records)


def test_sandbox_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRYDOCK_SANDBOX_IDLE_TTL", "90")
    monkeypatch.setenv("DRYDOCK_SANDBOX_LOCAL_ENVIRONMENT", '{"PATH": "/bin"}')
    monkeypatch.setenv("DRYDOCK_SANDBOX_GIT_USER_NAME", "Review Bot")
    sandbox = load_settings().sandbox
    assert sandbox.idle_ttl == timedelta(seconds=90)
    assert sandbox.local_environment == {"PATH": "/bin"}
    assert sandbox.git_user_name == "Review Bot"


def test_inconsistent_sandbox_settings_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRYDOCK_SANDBOX_EXEC_TIMEOUT", "7200")
    with pytest.raises(ConfigError, match="exec_timeout must not exceed max_exec_timeout"):
        load_settings()
    monkeypatch.delenv("DRYDOCK_SANDBOX_EXEC_TIMEOUT")
    monkeypatch.setenv("DRYDOCK_SANDBOX_GIT_USER_EMAIL", "not an address")
    with pytest.raises(ConfigError, match="DRYDOCK_SANDBOX_GIT_USER_EMAIL"):
        load_settings()


async def test_a_manager_is_wired_from_a_runtime_and_reaps_in_the_background(
    settings: Settings,
    nats_client: NatsClient,
    bus: Bus,
    redis: Redis,
    keys: Keys,
    sandbox_settings: SandboxSettings,
    coder_thread: str,
    local_provider: LocalProvider,
) -> None:
    runtime = Runtime(settings.model_copy(update={"sandbox": sandbox_settings}), nats_client, bus, redis, keys)
    manager = SandboxManager.from_runtime(runtime, credentials=NoProxy())
    assert isinstance(manager.provider, LocalProvider)
    backend = await manager.ensure_sandbox(coder_thread)
    await manager.records.touch(backend.id, at=time.time() - sandbox_settings.idle_ttl.total_seconds() - 1)
    reaper = asyncio.create_task(manager.reap_forever(0.05))
    try:

        async def reaped() -> bool:
            return await manager.records.get(backend.id) is None

        await eventually(reaped, what="the idle sandbox reaped")
    finally:
        reaper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reaper
        await manager.aclose()


class DetachedProvider(LocalProvider):
    """A provider whose sandboxes have no network path to the credential proxy."""

    name = "detached"
    reaches_credential_proxy = False


def _detached(settings: Settings, records: SandboxStore) -> SandboxProvider:
    return DetachedProvider(settings.sandbox, records)


def test_every_registered_provider_declares_its_path_to_the_proxy(
    records: SandboxStore, sandbox_settings: SandboxSettings
) -> None:
    local = create_provider(Settings(sandbox=sandbox_settings), records)
    assert local.reaches_credential_proxy is True
    from drydock.sandbox.providers.kubernetes import KubernetesProvider

    assert KubernetesProvider.reaches_credential_proxy is True


async def test_a_provider_without_a_path_to_the_proxy_skips_it_explicitly(
    settings: Settings,
    nats_client: NatsClient,
    bus: Bus,
    redis: Redis,
    keys: Keys,
    sandbox_settings: SandboxSettings,
    coder_thread: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(providers, "PROVIDERS", {**PROVIDERS, "detached": _detached})
    detached = sandbox_settings.model_copy(update={"provider": "detached"})
    runtime = Runtime(settings.model_copy(update={"sandbox": detached}), nats_client, bus, redis, keys)
    ledger = GrantLedger()
    manager = SandboxManager.from_runtime(runtime, credentials=ledger)
    try:
        assert isinstance(manager.provider, DetachedProvider)
        assert isinstance(manager.credentials, NoProxy)
        backend = await manager.ensure_sandbox(coder_thread)
        assert (await backend.aexecute("echo ready")).output.strip() == "ready"
        assert ledger.issued == []
        await manager.ensure_sandbox(coder_thread)
        assert ledger.refreshed == []
    finally:
        for handle in await manager.provider.list():
            await manager.provider.delete(handle.id)
        await manager.aclose()


async def test_a_provider_with_a_path_to_the_proxy_is_granted_access(
    settings: Settings,
    nats_client: NatsClient,
    bus: Bus,
    redis: Redis,
    keys: Keys,
    sandbox_settings: SandboxSettings,
    coder_thread: str,
) -> None:
    runtime = Runtime(settings.model_copy(update={"sandbox": sandbox_settings}), nats_client, bus, redis, keys)
    ledger = GrantLedger()
    manager = SandboxManager.from_runtime(runtime, credentials=ledger)
    try:
        assert manager.credentials is ledger
        await manager.ensure_sandbox(coder_thread)
        assert [grant.thread_id for grant in ledger.issued] == [coder_thread]
    finally:
        for handle in await manager.provider.list():
            await manager.provider.delete(handle.id)
        await manager.aclose()
