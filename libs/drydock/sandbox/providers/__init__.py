"""The provider factory map: the one place that lists sandbox providers by name."""

from __future__ import annotations

from collections.abc import Mapping

from drydock.config import Settings
from drydock.sandbox.errors import UnknownProvider
from drydock.sandbox.provider import ProviderFactory, SandboxProvider
from drydock.sandbox.records import SandboxStore


def _local(settings: Settings, records: SandboxStore) -> SandboxProvider:
    from drydock.sandbox.providers.local import LocalProvider

    return LocalProvider(settings.sandbox, records, proxy=settings.proxy)


def _kubernetes(settings: Settings, records: SandboxStore) -> SandboxProvider:
    from drydock.sandbox.providers.kubernetes import KubernetesProvider

    return KubernetesProvider(settings.sandbox, records)


PROVIDERS: Mapping[str, ProviderFactory] = {"local": _local, "kubernetes": _kubernetes}
"""Provider name (``DRYDOCK_SANDBOX_PROVIDER``) → factory. Factories import their module lazily,
so a provider's dependencies load only when it is chosen."""


def create_provider(settings: Settings, records: SandboxStore) -> SandboxProvider:
    """The provider named by ``settings.sandbox.provider``; :class:`UnknownProvider` otherwise."""
    name = settings.sandbox.provider
    try:
        factory = PROVIDERS[name]
    except KeyError:
        raise UnknownProvider(
            f"unknown sandbox provider {name!r} (DRYDOCK_SANDBOX_PROVIDER); known: {', '.join(sorted(PROVIDERS))}"
        ) from None
    return factory(settings, records)
