"""``drydock dev``: the full environment in one process.

NATS and Valkey are embedded when ``DRYDOCK_NATS_URL`` / ``DRYDOCK_REDIS_URL`` are unset. They
keep their data in :func:`dev_data_dir`, so a restart keeps settings and threads; ``--fresh``
starts empty. Every registered service that runs in development is started with a runtime of
its own: with embedded NATS each connects as its own user, with the permissions of
:mod:`drydock.bus.permissions`; the streams are provisioned first, as the provisioner. When it
exits (Ctrl-C, SIGTERM) it deletes the local sandboxes of its root: their daemons outlive the
process that started them, as pods would, and nothing else would stop them. Without
``DRYDOCK_CRYPTO_KEYS`` a development key is generated once and kept in the git-ignored
:func:`dev_data_dir` (:func:`with_development_keys`), so that grants, sessions and sandbox
records stay valid across restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import time
from pathlib import Path

import httpx
import structlog
from cryptography.fernet import Fernet
from pydantic import SecretStr
from redis.exceptions import RedisError

from drydock import services
from drydock.bus.permissions import PROVISIONER
from drydock.config import Settings
from drydock.configuration_report import missing
from drydock.embedded import EmbeddedUrls, embedded_infrastructure
from drydock.errors import describe, without_password
from drydock.infra.server_keys import ServerKeys
from drydock.runtime import Runtime, open_runtime
from drydock.sandbox.providers.local import LocalProvider
from drydock.sandbox.records import SandboxStore
from drydock.telemetry.logging import summarize_configuration_gaps

READY_WITHIN = 180.0
"""How long the web server may take to answer ``/readyz`` (its imports are slow on a loaded machine)."""

log = structlog.get_logger(__name__)

DEV_DATA_DIR = Path(".drydock") / "dev"
"""Relative to the directory ``drydock dev`` starts in (the project's; git-ignored)."""

CRYPTO_KEY_FILE = "crypto-key"
"""The development key's file name in :func:`dev_data_dir`."""


def _development_key(path: Path) -> tuple[str, bool]:
    """The key in ``path``, created (mode 0600) if missing; and whether it was created now."""
    try:
        return path.read_text().strip(), False
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = Fernet.generate_key().decode()
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        # Another process of the same checkout created it first: use theirs.
        return path.read_text().strip(), False
    with os.fdopen(descriptor, "w") as file:
        file.write(key + "\n")
    return key, True


def with_development_keys(settings: Settings) -> Settings:
    """``settings`` with the development key as ``DRYDOCK_CRYPTO_KEYS`` when none is set (one
    log line says so); unchanged otherwise."""
    if settings.crypto.keys:
        return settings
    path = dev_data_dir() / CRYPTO_KEY_FILE
    key, created = _development_key(path)
    log.warning(
        "DRYDOCK_CRYPTO_KEYS is unset: using the development key " + ("generated in " if created else "in ") + str(path)
    )
    return settings.model_copy(update={"crypto": settings.crypto.model_copy(update={"keys": [SecretStr(key)]})})


async def stop_sandboxes(runtime: Runtime) -> None:
    """Delete every local sandbox of the configured root, recorded or not."""
    if runtime.settings.sandbox.provider != "local":
        return
    records = SandboxStore(runtime.redis, runtime.keys, ServerKeys.from_settings(runtime.settings.crypto))
    provider = LocalProvider(runtime.settings.sandbox, records)
    try:
        handles = await provider.list()
        for handle in handles:
            await provider.delete(handle.id)
    except (RedisError, OSError) as error:
        print(f"drydock dev: sandboxes not stopped: {describe(error)}", file=sys.stderr, flush=True)
        return
    finally:
        await provider.aclose()
    if handles:
        print(f"drydock dev: stopped {len(handles)} sandbox(es)", file=sys.stderr, flush=True)


def dev_data_dir(root: Path | None = None) -> Path:
    """Where ``drydock dev`` keeps its embedded data: the Valkey append-only file, the JetStream store."""
    return (root or Path.cwd()) / DEV_DATA_DIR


def prepare_dev_data_dir(*, fresh: bool, root: Path | None = None) -> Path:
    """The data directory, emptied first when ``fresh``."""
    directory = dev_data_dir(root)
    if fresh and directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def service_settings(settings: Settings, urls: EmbeddedUrls | None, name: str) -> Settings:
    """``settings`` for service ``name``: on embedded NATS, its own user, which may not provision."""
    if urls is None or urls.nats_address is None or name not in urls.nats_passwords or name == PROVISIONER:
        return settings
    nats = settings.nats.model_copy(
        update={
            "url": urls.nats_address,
            "user": name,
            "password": SecretStr(urls.nats_passwords[name]),
            "provision": False,
        }
    )
    return settings.model_copy(update={"nats": nats})


async def web_ready(settings: Settings, within: float = READY_WITHIN) -> bool:
    """Whether the web server answered ``/readyz`` with 200 before the deadline."""
    host = settings.http.host if settings.http.host not in {"", "0.0.0.0", "::"} else "127.0.0.1"
    url = f"http://{'[' + host + ']' if ':' in host else host}:{settings.http.port}/readyz"
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(timeout=5.0) as client:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code == 200:
                    return True
            await asyncio.sleep(0.1)
    return False


def print_gaps(settings: Settings) -> None:
    """One summary of what is not configured, instead of a notice per service."""
    gaps = missing(settings)
    if not gaps:
        return
    print("drydock dev: not configured yet (set these variables, or see `drydock config check`):", flush=True)
    for gap in gaps:
        print(f"drydock dev:   {gap}", flush=True)


async def run_dev(settings: Settings, *, fresh: bool = False) -> None:
    need_nats, need_redis = settings.nats.url is None, settings.redis.url is None
    async with contextlib.AsyncExitStack() as stack:
        urls: EmbeddedUrls | None = None
        if need_nats or need_redis:
            workdir = prepare_dev_data_dir(fresh=fresh)
            print(f"drydock dev: data in {workdir}{' (fresh)' if fresh else ''}", flush=True)
            urls = await stack.enter_async_context(
                embedded_infrastructure(nats=need_nats, redis=need_redis, workdir=workdir)
            )
            settings = settings.model_copy(
                update={
                    "nats": settings.nats.model_copy(update={"url": settings.nats.url or urls.nats}),
                    "redis": settings.redis.model_copy(update={"url": settings.redis.url or urls.redis}),
                }
            )
        for what, shown, embedded in (
            ("NATS", urls.nats_address if urls and need_nats else settings.nats.url, need_nats),
            ("Redis", urls.redis_address if urls and need_redis else settings.redis.url, need_redis),
        ):
            print(f"drydock dev: {what} {without_password(shown or '')}{' (embedded)' if embedded else ''}", flush=True)
        # Provisions the streams; services with users of their own then do not.
        shared = await stack.enter_async_context(open_runtime(settings, name="dev"))
        # Runs once the services have stopped, before the shared runtime closes.
        stack.push_async_callback(stop_sandboxes, shared)
        to_run = [service for service in services.available().values() if service.in_dev]
        runtimes: dict[str, Runtime] = {}
        for service in to_run:
            own = service_settings(settings, urls if need_nats else None, service.name)
            if own is settings:
                runtimes[service.name] = shared
                if need_nats:
                    log.warning("service has no NATS user of its own; it runs as the provisioner", service=service.name)
            else:
                runtimes[service.name] = await stack.enter_async_context(open_runtime(own, name=service.name))
        print_gaps(settings)
        summarize_configuration_gaps()
        async with asyncio.TaskGroup() as group:
            for service in to_run:
                runtime = runtimes[service.name]
                user = runtime.settings.nats.user or "as configured"
                print(f"drydock dev: {service.name}: {service.listens(runtime)} (NATS user {user})", flush=True)
                group.create_task(service.run(runtime), name=service.name)
            if settings.http.port == 0 or await web_ready(settings):
                print("drydock dev: ready; Ctrl-C stops everything", file=sys.stderr, flush=True)
            else:
                print(
                    f"drydock dev: the web server did not answer /readyz within {READY_WITHIN:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
