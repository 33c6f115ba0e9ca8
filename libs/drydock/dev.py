"""``drydock dev``: the full environment in one process.

NATS and Valkey are embedded when ``DRYDOCK_NATS_URL`` / ``DRYDOCK_REDIS_URL`` are unset;
every registered service that runs in development is started on the shared runtime. Without
``DRYDOCK_CRYPTO_KEYS`` a development key is generated once and kept in the git-ignored
:func:`data_directory` (:func:`with_development_keys`), so that grants, sessions and sandbox
records stay valid across restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path

import structlog
from cryptography.fernet import Fernet
from pydantic import SecretStr

from drydock import services
from drydock.config import Settings
from drydock.infra.embedded import embedded_infrastructure
from drydock.runtime import open_runtime

log = structlog.get_logger(__name__)

CRYPTO_KEY_FILE = "crypto-key"
"""The development key's file name in :func:`data_directory`."""


def data_directory() -> Path:
    """The project's development data directory, ``.drydock/dev`` under the working directory
    (git-ignored)."""
    return Path(".drydock") / "dev"


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
    path = data_directory() / CRYPTO_KEY_FILE
    key, created = _development_key(path)
    log.warning(
        "DRYDOCK_CRYPTO_KEYS is unset: using the development key " + ("generated in " if created else "in ") + str(path)
    )
    return settings.model_copy(update={"crypto": settings.crypto.model_copy(update={"keys": [SecretStr(key)]})})


async def run_dev(settings: Settings) -> None:
    need_nats, need_redis = settings.nats.url is None, settings.redis.url is None
    async with contextlib.AsyncExitStack() as stack:
        if need_nats or need_redis:
            urls = await stack.enter_async_context(embedded_infrastructure(nats=need_nats, redis=need_redis))
            settings = settings.model_copy(
                update={
                    "nats": settings.nats.model_copy(update={"url": settings.nats.url or urls.nats}),
                    "redis": settings.redis.model_copy(update={"url": settings.redis.url or urls.redis}),
                }
            )
        print(f"drydock dev: NATS {settings.nats.url}{' (embedded)' if need_nats else ''}", flush=True)
        print(f"drydock dev: Redis {settings.redis.url}{' (embedded)' if need_redis else ''}", flush=True)
        runtime = await stack.enter_async_context(open_runtime(settings, name="dev"))
        to_run = [service for service in services.available().values() if service.in_dev]
        async with asyncio.TaskGroup() as group:
            for service in to_run:
                print(f"drydock dev: {service.name}: {service.listens(runtime)}", flush=True)
                group.create_task(service.run(runtime), name=service.name)
            print("drydock dev: ready; Ctrl-C stops everything", file=sys.stderr, flush=True)
