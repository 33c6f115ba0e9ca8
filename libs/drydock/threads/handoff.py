"""Handing a message to a thread: its metadata if new, then its inbox, then its wake.

The order matters: a woken worker must find the thread's kind and reply address, and a wake
that overtook its message could find an empty inbox and end the run. Every step is idempotent,
so a caller that failed part-way repeats the whole hand-off: the metadata stands, JetStream
drops the repeated inbox ``Nats-Msg-Id`` and the repeated wake within its duplicate window.
(The ingress dispatches webhooks in the same order, batched across a delivery's routes.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from drydock.bus.client import Bus
from drydock.bus.envelopes import InboxMessage, Wake
from drydock.roles import Role
from drydock.threads.inbox import AppendResult, Inbox
from drydock.threads.metadata import ThreadExists, ThreadMetadataStore


async def hand_off(
    bus: Bus,
    metadata: ThreadMetadataStore,
    role: Role,
    message: InboxMessage,
    *,
    create: Mapping[str, str] | None = None,
    reason: str | None = None,
) -> AppendResult:
    """Deliver ``message`` to its thread and wake the thread's ``role``.

    ``create`` holds the fields of a thread that may not exist yet (besides ``kind``); an
    existing thread keeps its metadata. The wake's ``reason`` defaults to the message's trigger.
    Raises :class:`~drydock.bus.BusUnavailable` or a Redis error when a step was not stored.
    """
    if create is not None:
        with contextlib.suppress(ThreadExists):
            await metadata.create(message.thread_id, kind=role, fields=create)
    appended = await Inbox(bus).append(message)
    wake = Wake(thread_id=message.thread_id, role=role, reason=reason or message.trigger or "inbox")
    await bus.wake(wake, msg_id=f"wake:{message.thread_id}:{message.delivery_id}")
    return appended
