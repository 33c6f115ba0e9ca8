"""A :class:`~drydock.sandbox.credentials.SandboxCredentials` for tests that records every call and
issues grants shaped like the credential proxy's (placeholders and ``insteadOf`` rules only)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from drydock.roles import Role
from drydock.sandbox.credentials import GrantError, SandboxGrant
from drydock.sandbox.handle import SandboxHandle

PROXY = "http://127.0.0.1:9"


@dataclass
class GrantLedger:
    issued: list[SandboxGrant] = field(default_factory=list)
    refreshed: list[SandboxGrant] = field(default_factory=list)
    revoked: list[SandboxGrant] = field(default_factory=list)
    refuse_refresh: bool = False

    async def issue(self, handle: SandboxHandle, *, thread_id: str, role: Role, repository: str | None) -> SandboxGrant:
        token = secrets.token_urlsafe(12)
        grant = SandboxGrant(
            sandbox_id=handle.id,
            thread_id=thread_id,
            role=role,
            repository=repository,
            token=token,
            environment={"GH_TOKEN": "proxy-injected", "GITHUB_API_URL": f"{PROXY}/g/{token}/api"},
            git_config=[(f"url.{PROXY}/g/{token}/git/.insteadOf", "https://github.com/")],
            api_base_url=f"{PROXY}/g/{token}/api",
        )
        self.issued.append(grant)
        return grant

    async def refresh(self, grant: SandboxGrant) -> None:
        if self.refuse_refresh or grant in self.revoked:
            raise GrantError("grant revoked")
        self.refreshed.append(grant)

    async def revoke(self, grant: SandboxGrant) -> None:
        self.revoked.append(grant)
