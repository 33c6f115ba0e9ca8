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

import structlog
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from starlette.background import BackgroundTask
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


def _read(reader: Reader, settings: Settings, headers: Mapping[str, str], body: bytes) -> Delivery:
    try:
        return reader(settings, headers, body)
    except ChannelNotConfigured as error:
        raise Rejected(404, error.reason, "not_configured") from None
    except VerificationFailed as error:
        raise Rejected(401, error.reason, "rejected_signature") from None
    except MalformedDelivery as error:
        raise Rejected(400, error.reason, "rejected_malformed") from None


async def handle(ingress: Ingress, request: Request, channel: Channel, reader: Reader) -> Response:
    started = time.perf_counter()
    outcome = "error"
    try:
        body = await read_body(request, ingress.settings.ingress.max_body_bytes)
        if len(body) > INLINE_READ_BYTES:
            # Verifying and parsing megabytes takes long enough to hold every other request.
            delivery = await asyncio.to_thread(_read, reader, ingress.settings, request.headers, body)
        else:
            delivery = _read(reader, ingress.settings, request.headers, body)
        if delivery.challenge is not None:
            outcome = "challenge"
            return JSONResponse({"challenge": delivery.challenge})
        accepted = await ingress.accept(delivery)
        outcome = accepted.outcome
        headers = {"Retry-After": RETRY_AFTER_SECONDS} if accepted.status == 503 else None
        background = None
        # A pickup cannot be acknowledged in a channel without credentials; skipping it here
        # saves a task per delivery. Replies still go to notify, which logs why they are not sent.
        acknowledge = [m for m in accepted.acknowledge if ingress.outbound.configured(m.reply_to.channel)]
        if acknowledge or accepted.replies:
            background = BackgroundTask(
                notify, ingress.outbound, acknowledge, accepted.replies, ingress.settings.ingress.outbound_timeout
            )
        return JSONResponse(accepted.body, accepted.status, headers=headers, background=background)
    except Rejected as rejected:
        outcome = rejected.outcome
        log.warning(
            "webhook rejected",
            channel=channel.value,
            status=rejected.status,
            reason=rejected.reason,
            client=request.client.host if request.client else None,
        )
        return JSONResponse({"error": rejected.reason, **rejected.details}, rejected.status)
    except Unavailable as unavailable:
        outcome = "unavailable"
        log.error("webhook not accepted: dependency unavailable", channel=channel.value, reason=unavailable.reason)
        return JSONResponse(
            {"error": f"temporarily unavailable: {unavailable.reason}"},
            503,
            headers={"Retry-After": RETRY_AFTER_SECONDS},
        )
    finally:
        DELIVERIES.labels(channel.value, outcome).inc()
        DURATION.labels(channel.value).observe(time.perf_counter() - started)


ENDPOINTS: tuple[tuple[str, Channel, Reader, str], ...] = tuple(
    (webhook.path, adapter.channel, adapter.reader(webhook), webhook.summary)
    for adapter in CHANNELS.values()
    for webhook in adapter.webhooks
)
"""Path, channel, reader (verify, then parse) and summary of every webhook endpoint."""


class WebhookEndpoint:
    """One webhook path as a bare ASGI app: Starlette's wrapper around a function endpoint
    (its exception-handler lookup and the wrapped ``send``) was a fortieth of the ingress's CPU
    per delivery, for handlers a webhook does not have. An unexpected error still reaches the
    server, which answers 500."""

    def __init__(self, ingress: Ingress, channel: Channel, reader: Reader) -> None:
        self._ingress = ingress
        self._channel = channel
        self._reader = reader

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await handle(self._ingress, Request(scope, receive), self._channel, self._reader)
        await response(scope, receive, send)


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
