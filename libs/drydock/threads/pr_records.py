"""The durable record of every pull request the agent created: which thread created it.

Comments on such a pull request and pushes to its branch must return to the thread that
created it, never start a fresh one (FIELD-NOTES: "failure modes"). The record is written when
the agent opens the pull request; an index from branch name to thread covers events that only
name the branch. As a last resort the branch name itself carries the thread's short id
(``<prefix><short id>-<slug>``, the prefix ``drydock/`` by default), resolved through an index
written when the thread starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import cast

from redis.asyncio import Redis

from drydock.infra.redis import Keys, Queue
from drydock.threads.ids import short_id

BRANCH_PREFIX = "drydock/"
_BRANCH_SHORT_ID = re.compile(r"(?:^|[/-])([0-9a-f]{12})(?:[-/]|$)")
_SLUG = re.compile(r"[^a-z0-9]+")


class PullRequestState(StrEnum):
    OPEN = "open"
    CLOSED = "closed"
    MERGED = "merged"


def branch_name(thread_id: str, title: str = "", *, prefix: str = BRANCH_PREFIX) -> str:
    """The branch the agent uses for a thread: ``<prefix><short id>-<slug of title>``; the
    prefix is ``drydock/`` unless the user's profile sets another."""
    slug = _SLUG.sub("-", title.lower()).strip("-")[:40].rstrip("-")
    return f"{prefix}{short_id(thread_id)}" + (f"-{slug}" if slug else "")


def branch_short_id(branch: str) -> str | None:
    """The thread short id an agent branch name carries, if it is one: twelve hex digits
    standing alone between the start, ``/`` or ``-`` and ``-``, ``/`` or the end, after any
    prefix. Only an id the short-id index knows names a thread."""
    found = _BRANCH_SHORT_ID.search(branch.removeprefix("refs/heads/"))
    return found.group(1) if found else None


@dataclass(frozen=True)
class PullRequestRecord:
    host: str
    repository: str
    """``owner/name``."""
    number: int
    thread_id: str
    branch: str
    state: PullRequestState = PullRequestState.OPEN
    created_at: datetime | None = None

    def to_hash(self) -> dict[str, str]:
        return {
            "host": self.host,
            "repository": self.repository,
            "number": str(self.number),
            "thread_id": self.thread_id,
            "branch": self.branch,
            "state": self.state.value,
            "created_at": (self.created_at or datetime.now(UTC)).isoformat(),
        }

    @classmethod
    def from_hash(cls, raw: dict[str, str]) -> PullRequestRecord | None:
        if not raw.get("thread_id"):
            return None
        return cls(
            host=raw["host"],
            repository=raw["repository"],
            number=int(raw["number"]),
            thread_id=raw["thread_id"],
            branch=raw.get("branch", ""),
            state=PullRequestState(raw.get("state", PullRequestState.OPEN.value)),
            created_at=datetime.fromisoformat(raw["created_at"]) if raw.get("created_at") else None,
        )


class PullRequestStore:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def record(self, record: PullRequestRecord) -> None:
        """Store the record, its branch index, and the thread's short-id index."""
        key = self._keys.pr_record(record.host, record.repository, record.number)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=record.to_hash())  # type: ignore[arg-type]
            if record.branch:
                pipe.set(self._keys.pr_branch(record.host, record.repository, record.branch), record.thread_id)
            pipe.sadd(self._keys.thread_prs(record.thread_id), key)
            if record.state is PullRequestState.OPEN:
                pipe.sadd(self._keys.open_prs(), key)
            else:
                pipe.srem(self._keys.open_prs(), key)
            pipe.set(self._keys.thread_short_id(short_id(record.thread_id)), record.thread_id)
            await pipe.execute()

    async def find(self, host: str, repository: str, number: int) -> PullRequestRecord | None:
        raw = cast(dict[str, str], await self._redis.hgetall(self._keys.pr_record(host, repository, number)))
        return PullRequestRecord.from_hash(raw)

    def queue_thread_for(self, pipe: Queue, host: str, repository: str, number: int) -> None:
        """Queue the lookup of the creating thread; the reply is the thread id or ``None``."""
        pipe.hget(self._keys.pr_record(host, repository, number), "thread_id")

    def queue_thread_for_branch(self, pipe: Queue, host: str, repository: str, branch: str) -> None:
        """Queue the branch index lookup; the reply is the thread id or ``None``."""
        pipe.get(self._keys.pr_branch(host, repository, branch.removeprefix("refs/heads/")))

    def queue_thread_for_short_id(self, pipe: Queue, short: str) -> None:
        """Queue the short id lookup; the reply is the thread id or ``None``."""
        pipe.get(self._keys.thread_short_id(short))

    async def thread_for(self, host: str, repository: str, number: int) -> str | None:
        """The thread that created the pull request; ``None`` if the agent did not create it."""
        return cast(str | None, await self._redis.hget(self._keys.pr_record(host, repository, number), "thread_id"))

    async def thread_for_branch(self, host: str, repository: str, branch: str) -> str | None:
        """The thread that owns an agent branch: from the branch index, else from the short id
        the branch name carries."""
        branch = branch.removeprefix("refs/heads/")
        found = cast(str | None, await self._redis.get(self._keys.pr_branch(host, repository, branch)))
        if found is not None:
            return found
        return await self.thread_for_short_id(branch_short_id(branch))

    async def thread_for_short_id(self, short: str | None) -> str | None:
        if short is None:
            return None
        return cast(str | None, await self._redis.get(self._keys.thread_short_id(short)))

    async def remember_thread(self, thread_id: str) -> None:
        """Index the thread by its short id, so a branch name alone finds it."""
        await self._redis.set(self._keys.thread_short_id(short_id(thread_id)), thread_id)

    def queue_remember_thread(self, pipe: Queue, thread_id: str) -> None:
        pipe.set(self._keys.thread_short_id(short_id(thread_id)), thread_id)

    async def set_state(self, host: str, repository: str, number: int, state: PullRequestState) -> bool:
        """Mark the pull request open, closed or merged; False if there is no record."""
        key = self._keys.pr_record(host, repository, number)
        if not await self._redis.exists(key):
            return False
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, "state", state.value)
            if state is PullRequestState.OPEN:
                pipe.sadd(self._keys.open_prs(), key)
            else:
                pipe.srem(self._keys.open_prs(), key)
            await pipe.execute()
        return True

    async def open_records(self) -> list[PullRequestRecord]:
        """Every open agent pull request (for the autofix fallback monitor)."""
        return await self._load(cast(set[str], await self._redis.smembers(self._keys.open_prs())))

    async def of_thread(self, thread_id: str) -> list[PullRequestRecord]:
        return await self._load(cast(set[str], await self._redis.smembers(self._keys.thread_prs(thread_id))))

    async def of_threads(self, thread_ids: list[str]) -> dict[str, list[PullRequestRecord]]:
        """Each thread's pull requests (in two round trips, for a list of threads)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for thread_id in thread_ids:
                pipe.smembers(self._keys.thread_prs(thread_id))
            found = cast(list[set[str]], await pipe.execute())
        records = await self._load(set().union(*found)) if found else []
        by_thread: dict[str, list[PullRequestRecord]] = {thread_id: [] for thread_id in thread_ids}
        for record in records:
            by_thread.setdefault(record.thread_id, []).append(record)
        return by_thread

    async def _load(self, keys: set[str]) -> list[PullRequestRecord]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in sorted(keys):
                pipe.hgetall(key)
            raws = cast(list[dict[str, str]], await pipe.execute())
        records = (PullRequestRecord.from_hash(raw) for raw in raws)
        return sorted(
            (record for record in records if record is not None), key=lambda r: (r.repository.lower(), r.number)
        )
