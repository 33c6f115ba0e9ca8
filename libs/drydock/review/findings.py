"""The reviewer's findings: one record per problem found in a pull request.

A reviewer thread reviews one pull request, so its findings live in one Redis hash keyed by
the thread: ``f:{id}`` holds a finding's JSON, ``fp:{fingerprint}`` the id of the finding with
that fingerprint, ``seq`` the last id's number (ids are ``F1``, ``F2``, … within the thread).
Every change is an optimistic transaction on that one key (``WATCH``, read, ``MULTI``), retried
when another writer won, so concurrent tool calls and publishes never lose an update.

The fingerprint identifies a problem across pushes: file, side, category, the normalized title
and the normalized text of the lines it points at. Adding a finding whose fingerprint belongs
to an open one confirms that one at the new head instead of adding it twice; a dismissed one
stays dismissed (a person or the reviewer decided it is not a problem); a resolved one that
comes back is a new finding.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import cast

from pydantic import BaseModel, ConfigDict, Field
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import WatchError

from drydock.infra.compare_and_set import back_off
from drydock.infra.redis import Keys
from drydock.review.diff import Side

MAX_RETRIES = 100


class Severity(StrEnum):
    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    INFO = "info"

    @property
    def rank(self) -> int:
        return _RANKS[self]


_RANKS = {Severity.CRITICAL: 4, Severity.HIGH: 3, Severity.MEDIUM: 2, Severity.LOW: 1, Severity.INFO: 0}


class FindingStatus(StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"
    DISMISSED = "dismissed"


class UnknownFinding(LookupError):
    """The thread has no finding with that id."""


class FindingConflict(RuntimeError):
    """An update lost to concurrent writers more times than it may retry."""


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    severity: Severity
    confidence: float = Field(ge=0.0, le=1.0)
    category: str
    title: str
    path: str
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)
    side: Side = Side.RIGHT
    description: str
    suggestion: str | None = None
    """Replacement text for the lines, posted as a ``suggestion`` block."""
    status: FindingStatus = FindingStatus.OPEN
    first_seen_sha: str
    last_confirmed_sha: str
    fingerprint: str
    comment_id: int | None = None
    """The review comment that carries the finding on the code host, once published."""
    review_id: int | None = None
    review_thread_id: str | None = None
    """The code host's id of the comment's review thread (GitHub's GraphQL node id)."""
    published_sha: str | None = None
    note: str | None = None
    """Why it was resolved or dismissed, or what the reviewer answered."""
    closed_by: str | None = None
    """Who resolved or dismissed it: ``reviewer`` or the person the reviewer acted for."""
    closed_sha: str | None = None
    reply: str | None = None
    """A reply waiting to be posted in the finding's review thread by the next publish."""
    thread_resolved: bool = False
    """The finding's review thread is resolved on the code host."""
    created_at: datetime
    updated_at: datetime

    @property
    def published(self) -> bool:
        return self.comment_id is not None

    def lines(self) -> str:
        return f"{self.start_line}" if self.start_line == self.end_line else f"{self.start_line}-{self.end_line}"


@dataclass(frozen=True)
class Draft:
    """A finding as the reviewer describes it, before it has an id."""

    severity: Severity
    confidence: float
    category: str
    title: str
    path: str
    start_line: int
    end_line: int
    side: Side
    description: str
    suggestion: str | None = None


@dataclass(frozen=True)
class Added:
    finding: Finding
    created: bool
    """False: a finding with the same fingerprint was open (now confirmed) or dismissed."""


_WORDS = re.compile(r"[^a-z0-9]+")


def fingerprint(draft: Draft, anchored: Iterable[str]) -> str:
    """What identifies the problem across pushes (line numbers move; the code and words do not)."""
    code = "\n".join(" ".join(line.split()) for line in anchored)
    title = _WORDS.sub(" ", draft.title.lower()).strip()
    key = "\x1f".join([draft.path, draft.side.value, draft.category.lower().strip(), title, code])
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def _now() -> datetime:
    return datetime.now(UTC)


class FindingStore:
    """The findings of one reviewer thread (one pull request of ``repository`` on ``host``)."""

    def __init__(self, redis: Redis, keys: Keys, thread_id: str, *, host: str, repository: str) -> None:
        self._redis = redis
        self._keys = keys
        self.thread_id = thread_id
        self.host = host
        self.repository = repository
        self._key = keys.findings(thread_id)

    async def get(self, finding_id: str) -> Finding:
        raw = cast(str | None, await self._redis.hget(self._key, f"f:{finding_id}"))
        if raw is None:
            raise UnknownFinding(f"there is no finding {finding_id} on this pull request")
        return Finding.model_validate_json(raw)

    async def all(self, *, status: FindingStatus | None = None) -> list[Finding]:
        """The thread's findings in the order they were found."""
        raw = cast(dict[str, str], await self._redis.hgetall(self._key))
        found = [Finding.model_validate_json(value) for name, value in raw.items() if name.startswith("f:")]
        found.sort(key=lambda finding: int(finding.id[1:]))
        return [finding for finding in found if status is None or finding.status is status]

    async def record_review(self, head_sha: str, review_id: int) -> None:
        """Note that a review of ``head_sha`` was published."""
        await self._redis.hset(self._key, f"review:{head_sha}", str(review_id))

    async def reviews(self) -> dict[str, int]:
        """The published reviews' ids, by the head they reviewed."""
        raw = cast(dict[str, str], await self._redis.hgetall(self._key))
        return {name.removeprefix("review:"): int(value) for name, value in raw.items() if name.startswith("review:")}

    async def add(self, draft: Draft, *, head_sha: str, anchored: Iterable[str] = ()) -> Added:
        """Record ``draft`` found at ``head_sha``; ``anchored`` is the text of the lines it points at."""
        digest = fingerprint(draft, anchored)
        async with self._redis.pipeline(transaction=True) as pipe:
            for attempt in range(MAX_RETRIES):
                try:
                    await pipe.watch(self._key)
                    known = cast(str | None, await pipe.hget(self._key, f"fp:{digest}"))
                    existing = await self._existing(pipe, known)
                    now = _now()
                    if existing is not None and existing.status is not FindingStatus.RESOLVED:
                        result = existing
                        if existing.status is FindingStatus.OPEN:
                            result = existing.model_copy(update={"last_confirmed_sha": head_sha, "updated_at": now})
                        pipe.multi()
                        pipe.hset(self._key, f"f:{result.id}", result.model_dump_json())
                        await pipe.execute()
                        await self._touch()
                        return Added(result, created=False)
                    number = int(cast(str | None, await pipe.hget(self._key, "seq")) or 0) + 1
                    finding = Finding(
                        id=f"F{number}",
                        severity=draft.severity,
                        confidence=draft.confidence,
                        category=draft.category,
                        title=draft.title,
                        path=draft.path,
                        start_line=draft.start_line,
                        end_line=draft.end_line,
                        side=draft.side,
                        description=draft.description,
                        suggestion=draft.suggestion,
                        first_seen_sha=head_sha,
                        last_confirmed_sha=head_sha,
                        fingerprint=digest,
                        created_at=now,
                        updated_at=now,
                    )
                    pipe.multi()
                    pipe.hset(
                        self._key,
                        mapping={
                            "seq": str(number),
                            f"f:{finding.id}": finding.model_dump_json(),
                            f"fp:{digest}": finding.id,
                        },
                    )
                    await pipe.execute()
                except WatchError:
                    await back_off(pipe, attempt)
                    continue
                await self._touch()
                return Added(finding, created=True)
        raise FindingConflict(f"thread {self.thread_id}: adding a finding lost {MAX_RETRIES} races in a row")

    async def _existing(self, pipe: Pipeline, finding_id: str | None) -> Finding | None:
        if finding_id is None:
            return None
        raw = cast(str | None, await pipe.hget(self._key, f"f:{finding_id}"))
        return Finding.model_validate_json(raw) if raw is not None else None

    async def update(self, finding_id: str, change: Callable[[Finding], Finding]) -> Finding:
        """Apply ``change`` to the finding atomically (it may run several times; no side effects)."""
        changed = await self.update_many([finding_id], lambda found: [change(found[0])])
        return changed[0]

    async def update_many(
        self, finding_ids: Iterable[str], change: Callable[[list[Finding]], list[Finding]]
    ) -> list[Finding]:
        """Apply ``change`` to the findings (in the order of ``finding_ids``) in one transaction."""
        ids = list(finding_ids)
        if not ids:
            return []
        fields = [f"f:{finding_id}" for finding_id in ids]
        async with self._redis.pipeline(transaction=True) as pipe:
            for attempt in range(MAX_RETRIES):
                try:
                    await pipe.watch(self._key)
                    raws = cast(list[str | None], await pipe.hmget(self._key, fields))
                    missing = [finding_id for finding_id, raw in zip(ids, raws, strict=True) if raw is None]
                    if missing:
                        raise UnknownFinding(f"there is no finding {', '.join(missing)} on this pull request")
                    current = [Finding.model_validate_json(cast(str, raw)) for raw in raws]
                    now = _now()
                    updated = [finding.model_copy(update={"updated_at": now}) for finding in change(list(current))]
                    pipe.multi()
                    pipe.hset(self._key, mapping={f"f:{finding.id}": finding.model_dump_json() for finding in updated})
                    await pipe.execute()
                except WatchError:
                    await back_off(pipe, attempt)
                    continue
                await self._touch()
                return updated
        raise FindingConflict(f"thread {self.thread_id}: an update lost {MAX_RETRIES} races in a row")

    async def _touch(self) -> None:
        """Note the thread in its repository's index of reviews (the analyzer reads outcomes there)."""
        await self._redis.zadd(self._keys.repository_reviews(self.host, self.repository), {self.thread_id: time.time()})


def close(finding: Finding, status: FindingStatus, *, note: str | None, by: str, head_sha: str | None) -> Finding:
    """``finding`` resolved or dismissed with ``note``; its thread gets the note as a reply."""
    reply = note or ("Resolved." if status is FindingStatus.RESOLVED else "Dismissed.")
    return finding.model_copy(
        update={
            "status": status,
            "note": note,
            "closed_by": by,
            "closed_sha": head_sha,
            "reply": reply if finding.published else None,
        }
    )
