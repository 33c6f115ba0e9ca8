"""The sandbox provider protocol: create, connect, delete and list sandboxes of one kind.

A provider is a module under :mod:`drydock.sandbox.providers` plus one entry in its factory map
(:data:`drydock.sandbox.providers.PROVIDERS`). Every provider persists a record per sandbox in
Redis (:class:`~drydock.sandbox.records.SandboxStore`), so a sandbox created by one worker can
be reached by id from any other. The provider-agnostic tests in ``tests/sandbox/provider_contract.py``
state the contract; a new provider subclasses them.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from typing import Protocol

from drydock.config import Settings
from drydock.sandbox.errors import (
    SandboxBusy,
    SandboxCreationFailed,
    SandboxError,
    SandboxNotFound,
    SandboxUnavailable,
    UnknownProvider,
)
from drydock.sandbox.handle import Isolation, SandboxHandle
from drydock.sandbox.records import SandboxStore

__all__ = [
    "Isolation",
    "ProviderFactory",
    "SandboxBusy",
    "SandboxCreationFailed",
    "SandboxError",
    "SandboxHandle",
    "SandboxNotFound",
    "SandboxProvider",
    "SandboxUnavailable",
    "UnknownProvider",
]


class SandboxProvider(Protocol):
    """Makes and removes sandboxes; says nothing about which thread uses which (that is the
    lifecycle manager's business, kept in thread metadata)."""

    name: str
    reaches_credential_proxy: bool
    """Whether this provider's sandboxes have a network path to the credential proxy. Without one
    the lifecycle gives them no grant at all (:class:`~drydock.sandbox.credentials.NoProxy`),
    explicitly, whatever credentials it was handed."""

    async def create(self, thread_id: str, *, labels: Mapping[str, str] | None = None) -> SandboxHandle:
        """A new sandbox for ``thread_id`` whose daemon answers health; :class:`SandboxCreationFailed`
        otherwise (and nothing is left behind)."""
        ...

    async def connect(self, sandbox_id: str) -> SandboxHandle:
        """The handle of an existing sandbox; :class:`SandboxNotFound` if it has no record or is gone."""
        ...

    async def delete(self, sandbox_id: str) -> bool:
        """Stop the sandbox and remove it with its record; ``False`` if there was nothing to delete."""
        ...

    async def list(self) -> builtins.list[SandboxHandle]:
        """Every sandbox this provider knows, oldest use first."""
        ...

    async def aclose(self) -> None:
        """Release the provider's own resources; sandboxes keep running."""
        ...


ProviderFactory = Callable[[Settings, SandboxStore], SandboxProvider]
"""Builds a provider from the settings and the record store."""
