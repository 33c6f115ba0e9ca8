"""The fake cluster's objects and its event log (resource versions, watch events)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

Object = dict[str, Any]


class ApiError(Exception):
    """Rendered as a Kubernetes ``Status`` with ``code``."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message

    def status(self) -> Object:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def matches(obj: Mapping[str, Any], label_selector: str | None, field_selector: str | None) -> bool:
    """Equality-based selectors only (``a=b,c=d``; field ``metadata.name`` and ``metadata.namespace``)."""
    metadata = obj["metadata"]
    for term in filter(None, (label_selector or "").split(",")):
        key, _, value = term.partition("=")
        if (metadata.get("labels") or {}).get(key) != value:
            return False
    for term in filter(None, (field_selector or "").split(",")):
        key, _, value = term.partition("=")
        if key not in ("metadata.name", "metadata.namespace"):
            raise ApiError(400, "BadRequest", f'field label not supported: "{key}"')
        if metadata.get(key.removeprefix("metadata.")) != value:
            return False
    return True


@dataclass
class Event:
    resource_version: int
    kind: str
    type: str
    obj: Object


@dataclass
class FakeCluster:
    """Pods and secrets by (namespace, name), and every change as an event."""

    pods: dict[tuple[str, str], Object] = field(default_factory=dict)
    secrets: dict[tuple[str, str], Object] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    failing_images: set[str] = field(default_factory=set)
    quota_exhausted: bool = False
    unschedulable: bool = False
    requests: list[tuple[str, str]] = field(default_factory=list)
    _version: int = 0
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def _stamp(self, obj: Object) -> int:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        return self._version

    async def record(self, kind: str, type_: str, obj: Object) -> None:
        version = self._stamp(obj) if type_ != "DELETED" else self._next()
        self.events.append(Event(version, kind, type_, copy.deepcopy(obj)))
        async with self._changed:
            self._changed.notify_all()

    def _next(self) -> int:
        self._version += 1
        return self._version

    @property
    def version(self) -> int:
        return self._version

    async def wait_for_change(self, within: float) -> None:
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(within):
                    await self._changed.wait()

    def new_metadata(self, metadata: Mapping[str, Any], namespace: str) -> Object:
        fresh = copy.deepcopy(dict(metadata))
        fresh.update({"namespace": namespace, "uid": str(uuid.uuid4()), "creationTimestamp": now()})
        return fresh

    def pod(self, namespace: str, name: str) -> Object:
        try:
            return self.pods[(namespace, name)]
        except KeyError:
            raise ApiError(404, "NotFound", f'pods "{name}" not found') from None

    def pods_in(self, namespace: str) -> list[Object]:
        return [pod for (ns, _), pod in sorted(self.pods.items()) if ns == namespace]
