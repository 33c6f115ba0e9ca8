"""De-duplication of deliveries by the source's delivery id and by the delivered object, in Redis.

A delivery is first *claimed* (``pending``, with a short TTL) in the same round trip as the
routing lookups, and marked *done* (kept for at least 24 h) only after JetStream acknowledged
every publish. A redelivery of a done delivery is answered 200 and dropped; one that arrives
while the first is still in flight is answered 503 so the sender retries after it finished. If
publishing fails the claim is released; if the process dies, the claim expires. Either way the
sender's retry is processed, and the stream's ``Nats-Msg-Id`` window drops anything that was
already stored.

The delivery id is a header the signature does not cover, and GitHub signs no time (Linear
allows a minute), so a captured body sent again under a new id would pass for a new delivery.
A delivery whose object has an identity in the signed body (``Delivery.identity``: a comment,
review, issue or agent session event, with the event and action) also claims the object, with
its delivery id as the value, in the same round trip, with the same TTLs, and releases it with
its own claim. A delivery whose object another delivery id claimed (in flight or done) is a
*replay*: answered 200 as a duplicate, nothing published, its own id marked done. So while a
first delivery is in flight a replay is dropped, and after the first failed, the first to come
of the sender's retry and a replay is routed, once. Events without an identity are
de-duplicated by the delivery id alone.

Done marks ride on the next delivery's lookup round trip, ahead of its claim, or are written by
themselves a moment later when no delivery comes (:data:`MARK_DELAY`). The answer does not wait
for its mark: the delivery is durable in JetStream already, and a mark lost with the process
only lets a redelivery through to that duplicate window, as a mark that failed to write always
did. A redelivery that finds the claim still ``pending`` while this process holds the mark
unwritten is answered as the duplicate it is.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from enum import StrEnum

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError

from drydock.channels.intents import DELIVERY_DONE, DELIVERY_PENDING
from drydock.errors import describe
from drydock.infra.redis import Batch, BatchConnections, Keys, Queue

log = structlog.get_logger(__name__)

MARK_DELAY = 0.002
"""Seconds a done mark waits for a lookup round trip to ride on before it is written alone."""


class ClaimResult(StrEnum):
    CLAIMED = "claimed"
    DUPLICATE = "duplicate"
    IN_PROGRESS = "in_progress"
    REPLAY = "replay"
    """The delivery id is new, but another one claimed the delivered object."""


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
        """``write_timeout`` bounds each write of done marks alone (for a client without socket timeouts)."""
        self._redis = redis
        self._batches = batches
        self._keys = keys
        self._write_timeout = write_timeout.total_seconds()
        self._ttl_ms = int(ttl.total_seconds() * 1000)
        self._claim_ttl_ms = int(claim_ttl.total_seconds() * 1000)
        self._unwritten: list[tuple[str, str]] = []
        """Done marks (key and value) not yet queued in a round trip."""
        self._unconfirmed: set[str] = set()
        """Delivery ids' done marks queued or not, until Redis confirmed them."""
        self._alone: asyncio.TimerHandle | None = None
        self._writers: set[asyncio.Task[None]] = set()

    def queue_claim(self, pipe: Queue, channel: str, delivery_id: str, identity: str | None = None) -> None:
        """Queue the claim of the delivery and, with an ``identity``, of its object (a reply
        each); decode the replies with :meth:`claim_result`."""
        pipe.set(self._keys.delivery(channel, delivery_id), DELIVERY_PENDING, nx=True, px=self._claim_ttl_ms, get=True)
        if identity is not None:
            pipe.set(
                self._keys.delivered_object(channel, identity), delivery_id, nx=True, px=self._claim_ttl_ms, get=True
            )

    def claim_result(
        self, replies: list[str | None], channel: str, delivery_id: str, identity: str | None = None
    ) -> ClaimResult:
        claim = replies[0]
        if claim is not None:
            if claim == DELIVERY_DONE or self._keys.delivery(channel, delivery_id) in self._unconfirmed:
                return ClaimResult.DUPLICATE
            return ClaimResult.IN_PROGRESS
        if identity is not None and replies[1] not in (None, delivery_id):
            return ClaimResult.REPLAY
        return ClaimResult.CLAIMED

    def queue_marks(self, pipe: Queue) -> list[tuple[str, str]]:
        """Queue the done marks waiting to be written (ahead of a claim, so a redelivery in the
        same round trip finds its mark); pass the result to :meth:`marks_written` once the round
        trip answered, or to :meth:`marks_lost` if it failed."""
        marks, self._unwritten = self._unwritten, []
        for key, value in marks:
            pipe.set(key, value, px=self._ttl_ms)
        return marks

    def marks_written(self, marks: list[tuple[str, str]]) -> None:
        self._unconfirmed.difference_update(key for key, _ in marks)

    def marks_lost(self, marks: list[tuple[str, str]]) -> None:
        """Their round trip failed: write them again with the next one."""
        self._unwritten.extend(marks)
        self._schedule()

    def done(self, channel: str, delivery_id: str, identity: str | None = None) -> None:
        """Every publish of the delivery was acknowledged: remember it, and with an ``identity``
        its object, for the full TTL (with the next round trip; see the module's description).
        A replay is done without its object, which stays the first claimant's."""
        key = self._keys.delivery(channel, delivery_id)
        self._unwritten.append((key, DELIVERY_DONE))
        if identity is not None:
            self._unwritten.append((self._keys.delivered_object(channel, identity), delivery_id))
        self._unconfirmed.add(key)
        self._schedule()

    def _schedule(self) -> None:
        if self._alone is None:
            self._alone = asyncio.get_running_loop().call_later(MARK_DELAY, self._write_alone)

    def _write_alone(self) -> None:
        self._alone = None
        if self._unwritten:
            task = asyncio.get_running_loop().create_task(self._write_marks())
            self._writers.add(task)
            task.add_done_callback(self._writers.discard)

    async def _write_marks(self) -> None:
        marks = Batch(self._batches)
        queued = self.queue_marks(marks)
        try:
            async with asyncio.timeout(self._write_timeout):
                await marks.execute()
        except (RedisError, OSError, TimeoutError) as error:
            # Durable already; the claim expires and the stream's Nats-Msg-Id drops a redelivery.
            self._unconfirmed.difference_update(key for key, _ in queued)
            log.warning("deliveries not marked done", count=len(queued), error=describe(error))
            return
        self.marks_written(queued)

    async def aclose(self) -> None:
        """Write the marks still waiting (at shutdown)."""
        if self._alone is not None:
            self._alone.cancel()
            self._alone = None
        if self._unwritten:
            await self._write_marks()
        if self._writers:
            await asyncio.gather(*self._writers, return_exceptions=True)

    async def release(self, channel: str, delivery_id: str, identity: str | None = None) -> None:
        """Publishing failed: forget the claim, and with an ``identity`` the object's, so the
        sender's retry is processed."""
        claims = [self._keys.delivery(channel, delivery_id)]
        if identity is not None:
            claims.append(self._keys.delivered_object(channel, identity))
        await self._redis.delete(*claims)
