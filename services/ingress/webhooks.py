"""The webhook endpoints, one for each webhook of each channel in
:data:`drydock.channels.registry.CHANNELS` (``POST /webhooks/github``, ``/webhooks/linear``,
``/webhooks/slack/events``, ``/webhooks/slack/interactivity``).

Each request: read the body (413 above the limit) → verify (401) → parse (400) → accept
(200 once durable, 503 when NATS or Redis cannot take it). Every refusal is logged with its
reason, never with the body.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import orjson
import structlog
from fastapi import APIRouter
from starlette.types import Receive, Scope, Send

from drydock.bus.envelopes import Channel
from drydock.channels.adapter import Reader
from drydock.channels.errors import ChannelNotConfigured, MalformedDelivery, VerificationFailed
from drydock.channels.intents import Delivery
from drydock.channels.registry import CHANNELS
from drydock.config import Settings
from drydock.http import DirectRoute
from services.ingress.accept import Ingress
from services.ingress.body import read_body
from services.ingress.errors import Rejected, Unavailable
from services.ingress.metrics import DELIVERIES, DURATION
from services.ingress.notify import notify

log = structlog.get_logger(__name__)

RETRY_AFTER_SECONDS = "5"
INLINE_READ_BYTES = 256 * 1024
"""Bodies up to this size are verified and parsed on the event loop; larger ones in a thread."""

_JSON = (b"content-type", b"application/json")
_RETRY_AFTER = (b"retry-after", RETRY_AFTER_SECONDS.encode())


def _read(reader: Reader, settings: Settings, headers: Mapping[str, str], body: bytes) -> Delivery:
    try:
        return reader(settings, headers, body)
    except ChannelNotConfigured as error:
        raise Rejected(404, error.reason, "not_configured") from None
    except VerificationFailed as error:
        raise Rejected(401, error.reason, "rejected_signature") from None
    except MalformedDelivery as error:
        raise Rejected(400, error.reason, "rejected_malformed") from None


def request_headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lowercase name (the server lowercases them), the first of a
    repeated name winning, as Starlette's ``Headers.get`` answers."""
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in reversed(scope["headers"])}


async def answer(send: Send, status: int, body: Mapping[str, Any], *, retry_after: bool = False) -> None:
    """A JSON answer, as Starlette's ``JSONResponse`` renders it (UTF-8, no whitespace)."""
    content = orjson.dumps(body)
    headers = [_JSON, (b"content-length", str(len(content)).encode())]
    if retry_after:
        headers.append(_RETRY_AFTER)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})


ENDPOINTS: tuple[tuple[str, Channel, Reader, str], ...] = tuple(
    (webhook.path, adapter.channel, adapter.reader(webhook), webhook.summary)
    for adapter in CHANNELS.values()
    for webhook in adapter.webhooks
)
"""Path, channel, reader (verify, then parse) and summary of every webhook endpoint."""


class WebhookEndpoint:
    """One webhook path as a bare ASGI app: no Starlette request, response or exception
    handlers, which a webhook does not need (each was a share of the ingress's CPU per
    delivery). An unexpected error still reaches the server, which answers 500."""

    def __init__(self, ingress: Ingress, channel: Channel, reader: Reader) -> None:
        self._ingress = ingress
        self._channel = channel
        self._reader = reader
        self._max_body = ingress.settings.ingress.max_body_bytes
        self._duration = DURATION.labels(channel.value)
        self._outcomes: dict[str, Any] = {}

    def _count(self, outcome: str) -> None:
        counter = self._outcomes.get(outcome)
        if counter is None:
            counter = self._outcomes[outcome] = DELIVERIES.labels(self._channel.value, outcome)
        counter.inc()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        outcome = "error"
        ingress = self._ingress
        try:
            headers = request_headers(scope)
            body = await read_body(receive, headers.get("content-length"), self._max_body)
            if len(body) > INLINE_READ_BYTES:
                # Verifying and parsing megabytes takes long enough to hold every other request.
                delivery = await asyncio.to_thread(_read, self._reader, ingress.settings, headers, body)
            else:
                delivery = _read(self._reader, ingress.settings, headers, body)
            if delivery.challenge is not None:
                outcome = "challenge"
                await answer(send, 200, {"challenge": delivery.challenge})
                return
            accepted = await ingress.accept(delivery)
            outcome = accepted.outcome
            await answer(send, accepted.status, accepted.body, retry_after=accepted.status == 503)
        except Rejected as rejected:
            outcome = rejected.outcome
            client = scope.get("client")
            log.warning(
                "webhook rejected",
                channel=self._channel.value,
                status=rejected.status,
                reason=rejected.reason,
                client=client[0] if client else None,
            )
            await answer(send, rejected.status, {"error": rejected.reason, **rejected.details})
            return
        except Unavailable as unavailable:
            outcome = "unavailable"
            log.error(
                "webhook not accepted: dependency unavailable", channel=self._channel.value, reason=unavailable.reason
            )
            await answer(send, 503, {"error": f"temporarily unavailable: {unavailable.reason}"}, retry_after=True)
            return
        finally:
            self._count(outcome)
            self._duration.observe(time.perf_counter() - started)
        # A pickup cannot be acknowledged in a channel without credentials; skipping it here
        # saves a task per delivery. Replies still go to notify, which logs why they are not sent.
        acknowledge = [m for m in accepted.acknowledge if ingress.outbound.configured(m.reply_to.channel)]
        if acknowledge or accepted.replies:
            # After the answer is sent, as Starlette's background tasks run.
            await notify(ingress.outbound, acknowledge, accepted.replies, ingress.settings.ingress.outbound_timeout)


def webhook_router(ingress: Ingress) -> APIRouter:
    """The webhook endpoints, served by ``ingress`` (one per process).

    They are direct routes, served ahead of the app's middleware and router: a webhook takes
    no parameters for FastAPI to resolve and needs none of its layers, which cost about a
    tenth of the ingress's CPU per delivery.
    """
    api = APIRouter()
    for path, channel, reader, summary in ENDPOINTS:
        endpoint = WebhookEndpoint(ingress, channel, reader)
        endpoint.__doc__ = summary
        api.routes.append(DirectRoute(path, endpoint, methods=["POST"], name=path, include_in_schema=False))
    return api
