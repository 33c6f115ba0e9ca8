"""The real credential the proxy injects upstream: a code host token and what it may do."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True)
class UpstreamToken:
    """A short-lived code host token (a GitHub App installation token).

    ``repositories`` lists the ``owner/name`` it is limited to (``None``: every repository of
    the installation); ``permissions`` are the code host's permission levels.
    """

    token: str = field(repr=False)
    expires_at: datetime
    permissions: dict[str, str] = field(default_factory=dict)
    repositories: tuple[str, ...] | None = None

    def expires_within(self, margin: timedelta, now: datetime | None = None) -> bool:
        return (now or datetime.now(UTC)) + margin >= self.expires_at

    def to_json(self) -> str:
        return json.dumps(
            {
                "token": self.token,
                "expires_at": self.expires_at.isoformat(),
                "permissions": self.permissions,
                "repositories": list(self.repositories) if self.repositories is not None else None,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> UpstreamToken:
        data = json.loads(text)
        repositories = data.get("repositories")
        return cls(
            token=data["token"],
            expires_at=datetime.fromisoformat(data["expires_at"]),
            permissions=dict(data.get("permissions") or {}),
            repositories=tuple(repositories) if repositories is not None else None,
        )
