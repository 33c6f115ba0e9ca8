"""Services are plugins: each registers a :class:`Service` under the ``drydock.services``
entry-point group, and ``drydock serve NAME`` / ``drydock dev`` find it there. The library
never imports a service."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from drydock.config import Settings
from drydock.runtime import Runtime

ENTRY_POINT_GROUP = "drydock.services"


@dataclass(frozen=True)
class Service:
    name: str
    description: str
    run: Callable[[Runtime], Coroutine[Any, Any, None]]
    """Runs the service until it is cancelled."""
    listens: Callable[[Runtime], str]
    """Where the service listens or what it consumes, for the start-up banner."""
    in_dev: bool = True
    """False for services that another one already covers in ``drydock dev`` (ingress and
    dashboard are served by ``web`` there)."""
    has_http: bool = True
    """False for services without an HTTP app of their own (workers, the autofix controller):
    ``drydock serve`` then answers ``/healthz``, ``/readyz`` and ``/metrics`` for them on
    ``DRYDOCK_HTTP_HOST``:``DRYDOCK_HTTP_PORT`` (unless ``DRYDOCK_HTTP_HEALTH_LISTENER`` is off)."""
    check: Callable[[Settings], None] | None = None
    """Checks the settings only this service needs before anything starts; raises
    :class:`~drydock.config.ConfigError` with one line naming the variable and the fix."""
    http_workers: bool = False
    """Whether several processes may serve its port (``DRYDOCK_HTTP_WORKERS``): a stateless HTTP
    app whose every process connects on its own."""
    needs_crypto_keys: bool = True
    """Whether the service signs or verifies records with ``DRYDOCK_CRYPTO_KEYS`` (grants,
    sessions, sandbox records); in production it refuses to start without them."""


class UnknownService(LookupError):
    pass


def names() -> list[str]:
    """The registered services' names, without importing them."""
    return sorted(entry.name for entry in entry_points(group=ENTRY_POINT_GROUP))


def _load(entry: EntryPoint) -> Service:
    service = entry.load()
    if not isinstance(service, Service) or service.name != entry.name:
        raise TypeError(f"entry point {entry.name!r} of {ENTRY_POINT_GROUP} is not a Service named so")
    return service


def available() -> dict[str, Service]:
    return {entry.name: _load(entry) for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)}


def get(name: str) -> Service:
    """The service ``name``; only its own module is imported."""
    for entry in entry_points(group=ENTRY_POINT_GROUP, name=name):
        return _load(entry)
    raise UnknownService(f"unknown service {name!r}; available: {', '.join(names()) or 'none'}")
