"""The credentials hook: what a sandbox is granted so that git and API calls go through the
credential proxy, and nothing real is ever stored inside the sandbox.

The lifecycle manager calls :meth:`SandboxCredentials.issue` when it creates or reconnects a
sandbox, :meth:`~SandboxCredentials.refresh` on every later ``ensure_sandbox`` (which checks the grant
is live, and extends it and has the proxy mint a fresh upstream token unless that was done moments
ago), and :meth:`~SandboxCredentials.revoke` when it deletes the sandbox. It
applies the grant inside the sandbox: :attr:`SandboxGrant.environment` is added to every command
the backend runs, and :attr:`SandboxGrant.git_config` is written with ``git config --global``.

The proxy-backed implementation lives in :mod:`drydock.credentials`; :class:`NoProxy` is the
explicit choice for providers without a network path to the proxy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Protocol, runtime_checkable

import structlog

from drydock.roles import Role
from drydock.sandbox.handle import SandboxHandle

log = structlog.get_logger(__name__)


class GrantError(RuntimeError):
    """A grant cannot be issued or refreshed (revoked, expired, proxy unreachable).

    When :meth:`SandboxCredentials.refresh` raises it, the lifecycle manager issues a new grant.
    """


@dataclass(frozen=True)
class SandboxGrant:
    """A sandbox's access to the credential proxy, and what must be applied inside the sandbox.

    ``token`` is the opaque, revocable grant the proxy knows (``None``: no grant at all, the
    sandbox has no path to the proxy). ``environment`` holds placeholders and addresses only,
    for example ``GH_TOKEN=proxy-injected`` and ``GITHUB_API_URL=<proxy>/api``; ``git_config``
    holds ``(key, value)`` pairs such as ``("url.http://proxy/github.com/.insteadOf",
    "https://github.com/")`` (a key may repeat; all its values are applied).
    """

    sandbox_id: str
    thread_id: str
    role: Role
    repository: str | None
    token: str | None = field(default=None, repr=False)
    environment: Mapping[str, str] = field(default_factory=dict)
    git_config: Sequence[tuple[str, str]] = ()
    api_base_url: str | None = None
    expires_at: datetime | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "environment", MappingProxyType(dict(self.environment)))
        object.__setattr__(self, "git_config", tuple(self.git_config))


@runtime_checkable
class SandboxCredentials(Protocol):
    """Issues, refreshes and revokes credential-proxy grants for sandboxes."""

    async def issue(self, handle: SandboxHandle, *, thread_id: str, role: Role, repository: str | None) -> SandboxGrant:
        """Grant ``handle``'s sandbox access for ``role`` to ``repository``; raise :class:`GrantError`."""
        ...

    async def refresh(self, grant: SandboxGrant) -> None:
        """Renew the grant and its upstream credential; raise :class:`GrantError` if it is gone."""
        ...

    async def revoke(self, grant: SandboxGrant) -> None:
        """Withdraw the grant; revoking an unknown or already revoked grant is not an error."""
        ...


class NoProxy:
    """For providers without a network path to the credential proxy: grants nothing, and says so.

    The sandbox then has no credential for the code host at all: clones of private repositories
    and pushes fail inside it, visibly, instead of silently using something else.
    """

    async def issue(self, handle: SandboxHandle, *, thread_id: str, role: Role, repository: str | None) -> SandboxGrant:
        log.warning(
            "sandbox has no path to the credential proxy; no grant issued",
            sandbox_id=handle.id,
            provider=handle.provider,
            thread_id=thread_id,
            role=role.value,
            repository=repository,
        )
        return SandboxGrant(sandbox_id=handle.id, thread_id=thread_id, role=role, repository=repository)

    async def refresh(self, grant: SandboxGrant) -> None:
        return None

    async def revoke(self, grant: SandboxGrant) -> None:
        return None
