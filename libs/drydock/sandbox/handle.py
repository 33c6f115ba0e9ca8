"""What a worker needs to reach one sandbox: its :class:`SandboxHandle`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType


class Isolation(StrEnum):
    """How a sandbox is separated from its host; reported on every handle."""

    BUBBLEWRAP = "bubblewrap"
    POD = "pod"
    NONE = "none"
    """A plain process on the host: no namespaces, the host's filesystem is visible."""


@dataclass(frozen=True)
class SandboxHandle:
    """Everything needed to reach a sandbox from any worker process.

    Persisted in Redis (one record per sandbox, see :class:`drydock.sandbox.records.SandboxStore`)
    so that another process can reconnect by id. ``token`` authenticates against the sandbox's
    daemon; it is left out of ``repr`` and of the record (the records derive it from the id).
    """

    id: str
    provider: str
    thread_id: str
    base_url: str
    token: str = field(repr=False)
    workspace: str
    created_at: datetime
    isolation: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))

    def to_record(self) -> dict[str, str]:
        """The flat string fields stored in the sandbox's Redis hash: all but the token."""
        return {
            "id": self.id,
            "provider": self.provider,
            "thread_id": self.thread_id,
            "base_url": self.base_url,
            "workspace": self.workspace,
            "created_at": self.created_at.isoformat(),
            "isolation": self.isolation,
            "labels": json.dumps(dict(self.labels), sort_keys=True),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, str], *, token: str) -> SandboxHandle:
        """Rebuild a handle from :meth:`to_record`'s fields and its daemon's ``token``;
        ``ValueError`` if a field is missing."""
        try:
            return cls(
                id=record["id"],
                provider=record["provider"],
                thread_id=record["thread_id"],
                base_url=record["base_url"],
                token=token,
                workspace=record["workspace"],
                created_at=datetime.fromisoformat(record["created_at"]),
                isolation=record["isolation"],
                labels=json.loads(record.get("labels", "{}")),
            )
        except KeyError as missing:
            raise ValueError(f"sandbox record lacks the field {missing}") from None
