"""What the ingress says back to the source after answering the webhook: the pickup
acknowledgement (👀, or a Linear thought) and replies that start no work (which repository?).

They run after the response is sent, bounded by a timeout, and never decide whether a
delivery was accepted: the work is already durable. A failure is logged and counted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

from drydock.bus.envelopes import InboxMessage
from drydock.channels.errors import ChannelError
from drydock.channels.outbound import Outbound
from services.ingress.metrics import NOTIFICATIONS
from services.ingress.routing import Reply

log = structlog.get_logger(__name__)


async def _acknowledge(outbound: Outbound, message: InboxMessage) -> None:
    await outbound.acknowledge(message)
    NOTIFICATIONS.labels(message.reply_to.channel.value, "acknowledged").inc()


async def _reply(outbound: Outbound, reply: Reply) -> None:
    channel = reply.address.channel
    if not outbound.configured(channel):
        log.warning("reply not sent: channel has no credentials", channel=channel.value)
        return
    await outbound.reply(reply.address, reply.text)
    NOTIFICATIONS.labels(channel.value, "replied").inc()


async def notify(outbound: Outbound, acknowledge: list[InboxMessage], replies: list[Reply], within: float) -> None:
    """Send every acknowledgement (each of a channel with credentials) and reply concurrently;
    log the ones that fail."""

    async def guarded(what: str, channel: str, thread_id: str | None, sending: Coroutine[Any, Any, None]) -> None:
        try:
            async with asyncio.timeout(within):
                await sending
        except (ChannelError, TimeoutError) as error:
            NOTIFICATIONS.labels(channel, "failed").inc()
            reason = error.reason if isinstance(error, ChannelError) else f"no answer within {within} s"
            log.warning(f"{what} failed", channel=channel, thread_id=thread_id, error=reason)
        except Exception:
            NOTIFICATIONS.labels(channel, "failed").inc()
            log.exception(f"{what} failed unexpectedly", channel=channel, thread_id=thread_id)

    await asyncio.gather(
        *(
            guarded("pickup acknowledgement", m.channel.value, m.thread_id, _acknowledge(outbound, m))
            for m in acknowledge
        ),
        *(guarded("reply", r.address.channel.value, None, _reply(outbound, r)) for r in replies),
    )
