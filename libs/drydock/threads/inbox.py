"""The inbox: every inbound message of a thread, in order, on ``drydock.inbox.{thread_id}``.

A message's position is its JetStream stream sequence. A worker's cursor is the sequence of
the last message it injected; it is checkpointed together with the injection, so reading
after the cursor gives exactly the messages not yet seen.

During a run the worker reads through an :class:`InboxWatch`: a subscription to the thread's
subject says when something arrived, so a model call with nothing new makes no JetStream round
trip (one was most of a fast agent step's own cost).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass

import structlog
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError
from nats.js.errors import NotFoundError

from drydock.bus import subjects
from drydock.bus.client import Bus
from drydock.bus.envelopes import InboxMessage
from drydock.bus.streams import INBOX_STREAM
from drydock.errors import describe

log = structlog.get_logger(__name__)

RECHECK = 1.0
"""Seconds after which a watch reads the stream although it heard nothing: core NATS delivers at
most once, so a notice lost in a reconnect delays a message by at most this long."""


@dataclass(frozen=True)
class AppendResult:
    seq: int
    duplicate: bool


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    message: InboxMessage
    headers: Mapping[str, str] | None = None
    """The message's NATS headers (its trace context among them)."""


class Inbox:
    def __init__(self, bus: Bus) -> None:
        self._bus = bus

    @property
    def bus(self) -> Bus:
        return self._bus

    def encode(self, message: InboxMessage) -> bytes:
        """``message`` as :meth:`append` stores it; raises
        :class:`~drydock.bus.client.MessageTooLarge` when NATS would refuse it."""
        return self._bus.encode(subjects.inbox(message.thread_id), message)

    async def append(
        self, message: InboxMessage, *, bounded: bool = True, encoded: bytes | None = None
    ) -> AppendResult:
        """Store the message once it is acknowledged; a repeated delivery id is stored once
        (within the stream's duplicate window) and reported as ``duplicate``. ``bounded``: as
        :meth:`~drydock.bus.client.Bus.publish`'s; ``encoded``: the message as :meth:`encode`
        returned it."""
        ack = await self._bus.publish(
            subjects.inbox(message.thread_id),
            encoded if encoded is not None else message,
            msg_id=f"{message.thread_id}:{message.delivery_id}",
            bounded=bounded,
        )
        return AppendResult(seq=ack.seq, duplicate=bool(ack.duplicate))

    async def read_after(self, thread_id: str, cursor: int = 0, *, limit: int | None = None) -> list[StoredMessage]:
        """The thread's messages with a sequence above ``cursor``, oldest first."""
        subject = subjects.inbox(thread_id)
        found: list[StoredMessage] = []
        seq = cursor + 1
        while limit is None or len(found) < limit:
            try:
                raw = await self._bus.js.get_msg(INBOX_STREAM, seq=seq, subject=subject, next=True, direct=True)
            except NotFoundError:
                break
            assert raw.seq is not None
            assert raw.data is not None
            found.append(StoredMessage(raw.seq, InboxMessage.model_validate_json(raw.data), raw.headers))
            seq = raw.seq + 1
        return found

    async def watch(self, thread_id: str, *, recheck: float = RECHECK) -> InboxWatch:
        """A reader of ``thread_id``'s inbox that skips the stream while nothing arrived;
        :meth:`InboxWatch.close` it at the end of the run."""
        watch = InboxWatch(self, thread_id, recheck=recheck)
        await watch.start()
        return watch


class InboxWatch:
    """Reads one thread's inbox like :meth:`Inbox.read_after`, but answers without a round trip
    when no message was heard on the thread's subject since the last read, that read is younger
    than ``recheck`` seconds, and it answers the question: "nothing new" for a cursor at or after
    the end it found, the same messages for the same cursor (a run's first model call asks what
    the run's start read).

    The subscription is confirmed by the server (a flush) before the first read, so a message
    published after that read is heard. Without a subscription (NATS refused it) every call reads.
    """

    def __init__(self, inbox: Inbox, thread_id: str, *, recheck: float = RECHECK) -> None:
        self._inbox = inbox
        self.thread_id = thread_id
        self._recheck = recheck
        self._subscription: Subscription | None = None
        self._heard = True
        self._read_at = -math.inf
        self._last: tuple[int, list[StoredMessage]] = (-1, [])
        """The last read's cursor and what it found."""

    async def start(self) -> None:
        nc = self._inbox.bus.nc

        async def heard(_message: Msg) -> None:
            self._heard = True

        try:
            self._subscription = await nc.subscribe(subjects.inbox(self.thread_id), cb=heard)
            await nc.flush(timeout=math.ceil(self._inbox.bus.timeout))
        except (NatsError, TimeoutError) as error:
            log.warning(
                "inbox watch unavailable, reading at every call", thread_id=self.thread_id, error=describe(error)
            )
            await self.close()

    async def close(self) -> None:
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            try:
                await subscription.unsubscribe()
            except NatsError as error:
                log.warning("inbox watch not closed", thread_id=self.thread_id, error=describe(error))

    async def read_after(self, thread_id: str, cursor: int = 0, *, limit: int | None = None) -> list[StoredMessage]:
        """The thread's messages with a sequence above ``cursor``, oldest first."""
        if thread_id != self.thread_id or limit is not None:
            return await self._inbox.read_after(thread_id, cursor, limit=limit)
        now = asyncio.get_running_loop().time()
        if self._subscription is not None and not self._heard and now - self._read_at < self._recheck:
            read_cursor, read = self._last
            if cursor >= (read[-1].seq if read else read_cursor):
                return []
            if cursor == read_cursor:
                return list(read)
        # Cleared before the read: a message heard while it runs is read again next time.
        self._heard = False
        try:
            found = await self._inbox.read_after(thread_id, cursor)
        except BaseException:
            self._heard = True
            raise
        self._read_at = now
        self._last = (cursor, found)
        return list(found)
