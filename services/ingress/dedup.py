"""De-duplication of deliveries by the source's delivery id, in Redis.

A delivery is first *claimed* (``pending``, with a short TTL) in the same round trip as the
routing lookups, and marked *done* (kept for at least 24 h) only after JetStream acknowledged
every publish. A redelivery of a done delivery is answered 200 and dropped; one that arrives
while the first is still in flight is answered 503 so the sender retries after it finished. If
publishing fails the claim is released; if the process dies, the claim expires. Either way the
sender's retry is processed, and the stream's ``Nats-Msg-Id`` window drops anything that was
already stored.

Done marks are group-committed: the marks of deliveries finishing together are written in
one batch, and each request still waits for its own mark before answering.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from enum import StrEnum

from redis.asyncio import Redis

from drydock.infra.redis import Batch, BatchConnections, Keys, Queue

PENDING = "pending"
DONE = "done"


class ClaimResult(StrEnum):
    CLAIMED = "claimed"
    DUPLICATE = "duplicate"
    IN_PROGRESS = "in_progress"


class Deliveries:
    def __init__(
        self,
        redis: Redis,
        batches: BatchConnections,
        keys: Keys,
        *,
        ttl: timedelta,
        claim_ttl: timedelta,
        write_timeout: timedelta,
    ) -> None:
        """``write_timeout`` bounds each group of done marks (for a client without socket timeouts)."""
        self._redis = redis
        self._batches = batches
        self._keys = keys
        self._write_timeout = write_timeout.total_seconds()
        self._ttl_ms = int(ttl.total_seconds() * 1000)
        self._claim_ttl_ms = int(claim_ttl.total_seconds() * 1000)
        self._unwritten: list[tuple[str, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None

    def queue_claim(self, pipe: Queue, channel: str, delivery_id: str) -> None:
        """Queue the claim; decode its reply with :func:`claim_result`."""
        pipe.set(self._keys.delivery(channel, delivery_id), PENDING, nx=True, px=self._claim_ttl_ms, get=True)

    async def done(self, channel: str, delivery_id: str) -> None:
        """Every publish of the delivery was acknowledged: remember it for the full TTL.
        Raises what Redis raised if the mark could not be written."""
        loop = asyncio.get_running_loop()
        written: asyncio.Future[None] = loop.create_future()
        self._unwritten.append((self._keys.delivery(channel, delivery_id), written))
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write_marks())
        await written

    async def _write_marks(self) -> None:
        while self._unwritten:
            batch, self._unwritten = self._unwritten, []
            try:
                marks = Batch(self._batches)
                for key, _ in batch:
                    marks.set(key, DONE, px=self._ttl_ms)
                async with asyncio.timeout(self._write_timeout):
                    await marks.execute()
            except BaseException as error:
                for _, written in batch:
                    if not written.done():
                        written.set_exception(error)
                if isinstance(error, asyncio.CancelledError):
                    raise
            else:
                for _, written in batch:
                    if not written.done():
                        written.set_result(None)

    async def release(self, channel: str, delivery_id: str) -> None:
        """Publishing failed: forget the claim so the sender's retry is processed."""
        await self._redis.delete(self._keys.delivery(channel, delivery_id))


def claim_result(reply: str | None) -> ClaimResult:
    if reply is None:
        return ClaimResult.CLAIMED
    return ClaimResult.DUPLICATE if reply == DONE else ClaimResult.IN_PROGRESS
