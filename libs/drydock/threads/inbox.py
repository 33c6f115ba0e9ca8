"""The inbox: every inbound message of a thread, in order, on ``drydock.inbox.{thread_id}``.

A message's position is its JetStream stream sequence. A worker's cursor is the sequence of
the last message it injected; it is checkpointed together with the injection, so reading
after the cursor gives exactly the messages not yet seen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nats.js.errors import NotFoundError

from drydock.bus import subjects
from drydock.bus.client import Bus
from drydock.bus.envelopes import InboxMessage
from drydock.bus.streams import INBOX_STREAM


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

    async def append(self, message: InboxMessage) -> AppendResult:
        """Store the message once it is acknowledged; a repeated delivery id is stored once
        (within the stream's duplicate window) and reported as ``duplicate``."""
        ack = await self._bus.publish(
            subjects.inbox(message.thread_id),
            message,
            msg_id=f"{message.thread_id}:{message.delivery_id}",
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
