"""Services are plugins: each registers a :class:`Service` under the ``drydock.services``
entry-point group, and ``drydock serve NAME`` / ``drydock dev`` find it there. The library
never imports a service."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

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
    needs_crypto_keys: bool = True
    """Whether the service signs or verifies records with ``DRYDOCK_CRYPTO_KEYS`` (grants,
    sessions, sandbox records); in production it refuses to start without them."""


class UnknownService(LookupError):
    pass


def available() -> dict[str, Service]:
    found: dict[str, Service] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        service = entry.load()
        if not isinstance(service, Service) or service.name != entry.name:
            raise TypeError(f"entry point {entry.name!r} of {ENTRY_POINT_GROUP} is not a Service named so")
        found[entry.name] = service
    return dict(sorted(found.items()))


def get(name: str) -> Service:
    services = available()
    if name not in services:
        raise UnknownService(f"unknown service {name!r}; available: {', '.join(services) or 'none'}")
    return services[name]
