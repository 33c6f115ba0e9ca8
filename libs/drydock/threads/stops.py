"""Stopping a thread's run from another process (the dashboard's stop button).

A request is a flag in Redis with a TTL; the worker running the thread checks it between graph
steps (at most every quarter second, and when the graph ends) and, when it is set, takes it (so
it stops one run, once), ends the run with a ``stopped`` event, counts the messages queued so far
as answered (no inbox re-check or redelivered wake starts the run again) and releases the thread.
A request made while no run is going on stops the next run at its first step; unclaimed, it
expires after ``ttl``. The thread stays usable: the next message starts a new run, which
resumes from the last checkpoint.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from drydock.infra.redis import Keys

DEFAULT_TTL = timedelta(minutes=10)


class StopRequests:
    def __init__(self, redis: Redis, keys: Keys, *, ttl: timedelta = DEFAULT_TTL) -> None:
        self._redis = redis
        self._keys = keys
        self._ttl_ms = int(ttl.total_seconds() * 1000)

    async def request(self, thread_id: str, *, by: str) -> None:
        """Ask the thread's run to stop; ``by`` names who asked (kept in the flag for the event)."""
        value = f"{by}|{datetime.now(UTC).isoformat()}"
        await self._redis.set(self._keys.thread_stop(thread_id), value, px=self._ttl_ms)

    async def pending(self, thread_id: str) -> bool:
        """Whether a stop was asked for and not taken yet."""
        return bool(await self._redis.exists(self._keys.thread_stop(thread_id)))

    async def take(self, thread_id: str) -> str | None:
        """Claim the thread's stop request: who asked, or ``None`` when none is pending."""
        raw = await self._redis.getdel(self._keys.thread_stop(thread_id))
        if raw is None:
            return None
        return str(raw).split("|", 1)[0]
