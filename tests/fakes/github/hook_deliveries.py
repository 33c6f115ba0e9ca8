"""An App's webhook and its deliveries. The fake sends an event to the App's webhook URL as
GitHub does (signed, with the ``X-GitHub-*`` headers, within a deadline) and records each
attempt; the App, by its JWT, lists the attempts newest first (``GET /app/hook/deliveries``,
paginated by cursor), reads one (``GET /app/hook/deliveries/{delivery_id}``) and asks for one
again (``POST /app/hook/deliveries/{delivery_id}/attempts``: 202 at once, the redelivery is
sent in the background)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

import httpx
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from tests.fakes import signing
from tests.fakes.github.auth import authenticated_app, state
from tests.fakes.github.errors import GithubError, not_found
from tests.fakes.github.state import App, GithubState, HookDelivery

router = APIRouter()

LIST_DOCS = "https://docs.github.com/rest/apps/webhooks#list-deliveries-for-an-app-webhook"
GET_DOCS = "https://docs.github.com/rest/apps/webhooks#get-a-delivery-for-an-app-webhook"
REDELIVER_DOCS = "https://docs.github.com/rest/apps/webhooks#redeliver-a-delivery-for-an-app-webhook"

SIGNATURES = frozenset({"X-Hub-Signature", "X-Hub-Signature-256"})
"""The headers computed afresh, with the current secret, for each attempt."""
CURSOR_PREFIX = "v1_"


def _webhook(app: App) -> tuple[str, str]:
    if app.webhook_url is None or app.webhook_secret is None:
        raise ValueError(f"the App {app.slug!r} has no webhook; configure_webhook first")
    return app.webhook_url, app.webhook_secret


def _signed(app: App, event: str, payload: dict[str, Any], guid: str) -> signing.SignedRequest:
    _, secret = _webhook(app)
    return signing.github(secret, event, payload, delivery_id=guid).with_headers(
        X_GitHub_Hook_ID=str(app.hook_id), X_GitHub_Hook_Installation_Target_ID=str(app.id)
    )


def _id_of(payload: dict[str, Any], key: str) -> int | None:
    found = payload.get(key)
    if isinstance(found, dict) and isinstance(found.get("id"), int):
        return int(found["id"])
    return None


async def _attempt(
    github: GithubState,
    app: App,
    headers: dict[str, str],
    body: bytes,
    *,
    event: str,
    action: str | None,
    installation_id: int | None,
    repository_id: int | None,
    redelivery: bool,
) -> HookDelivery:
    """POST ``body`` to the App's webhook URL and record the attempt."""
    url, _ = _webhook(app)
    # GitHub reports the time to the second; the record says what the API says.
    delivered_at = datetime.now(UTC).replace(microsecond=0)
    started = time.monotonic()
    status_code = 0
    response_headers: dict[str, str] = {}
    response_body: str | None = None
    try:
        async with httpx.AsyncClient(timeout=github.webhook_timeout, trust_env=False) as client:
            response = await client.post(url, content=body, headers=headers)
    except httpx.TimeoutException:
        status = "timed out"
    except httpx.TransportError:
        status = "failed to connect to host"
    else:
        status_code = response.status_code
        status = "OK" if response.is_success else f"Invalid HTTP Response: {status_code}"
        response_headers, response_body = dict(response.headers), response.text
    delivery = HookDelivery(
        id=github.next_delivery_id(),
        guid=headers["X-GitHub-Delivery"],
        delivered_at=delivered_at,
        redelivery=redelivery,
        duration=time.monotonic() - started,
        status=status,
        status_code=status_code,
        event=event,
        action=action,
        installation_id=installation_id,
        repository_id=repository_id,
        app_id=app.id,
        url=url,
        headers={name: value for name, value in headers.items() if name not in SIGNATURES},
        body=body,
        response_headers=response_headers,
        response_body=response_body,
    )
    github.hook_deliveries.append(delivery)
    return delivery


async def deliver(
    github: GithubState, app: App, event: str, payload: dict[str, Any], *, installation_id: int | None = None
) -> HookDelivery:
    """Send ``event`` with ``payload`` to ``app``'s webhook as a new delivery and record it."""
    signed = _signed(app, event, payload, str(uuid.uuid4()))
    action = payload.get("action")
    return await _attempt(
        github,
        app,
        signed.headers,
        signed.body,
        event=event,
        action=action if isinstance(action, str) else None,
        installation_id=installation_id if installation_id is not None else _id_of(payload, "installation"),
        repository_id=_id_of(payload, "repository"),
        redelivery=False,
    )


def redeliver(github: GithubState, app: App, original: HookDelivery) -> asyncio.Task[HookDelivery]:
    """Start sending ``original`` again in the background: its headers and body, its ``guid``,
    signed with the App's current secret."""
    # signing.github serializes compactly, and serializing what that serialization parses gives
    # the same bytes again, so the signatures it computes are over the original body.
    signed = _signed(app, original.event, json.loads(original.body), original.guid)
    if signed.body != original.body:
        raise ValueError(f"delivery {original.id}'s body does not serialize back to itself")
    headers = original.headers | {name: value for name, value in signed.headers.items() if name in SIGNATURES}
    task = asyncio.create_task(
        _attempt(
            github,
            app,
            headers,
            original.body,
            event=original.event,
            action=original.action,
            installation_id=original.installation_id,
            repository_id=original.repository_id,
            redelivery=True,
        )
    )
    github.redeliveries.add(task)
    return task


def _timestamp(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def delivery_json(delivery: HookDelivery) -> dict[str, Any]:
    """An item of ``GET /app/hook/deliveries``."""
    return {
        "id": delivery.id,
        "guid": delivery.guid,
        "delivered_at": _timestamp(delivery.delivered_at),
        "redelivery": delivery.redelivery,
        "duration": delivery.duration,
        "status": delivery.status,
        "status_code": delivery.status_code,
        "event": delivery.event,
        "action": delivery.action,
        "installation_id": delivery.installation_id,
        "repository_id": delivery.repository_id,
        "throttled_at": delivery.throttled_at,
    }


def _per_page(request: Request) -> int:
    try:
        return max(1, min(100, int(request.query_params.get("per_page", "30"))))
    except ValueError:
        return 30


def _cursor_id(cursor: str) -> int:
    digits = cursor.removeprefix(CURSOR_PREFIX)
    if not cursor.startswith(CURSOR_PREFIX) or not digits.isascii() or not digits.isdigit():
        raise GithubError(400, "Bad Request", LIST_DOCS)
    return int(digits)


def _delivery(github: GithubState, app: App, delivery_id: str, documentation_url: str) -> HookDelivery:
    if delivery_id.isascii() and delivery_id.isdigit():
        for delivery in github.hook_deliveries:
            if delivery.id == int(delivery_id) and delivery.app_id == app.id:
                return delivery
    raise not_found(documentation_url)


@router.get("/app/hook/deliveries")
async def list_deliveries(request: Request, app: Annotated[App, Depends(authenticated_app)]) -> JSONResponse:
    per_page = _per_page(request)
    cursor = request.query_params.get("cursor")
    newest = _cursor_id(cursor) if cursor is not None else None
    deliveries = sorted(
        (
            delivery
            for delivery in state(request).hook_deliveries
            if delivery.app_id == app.id and (newest is None or delivery.id <= newest)
        ),
        key=lambda delivery: delivery.id,
        reverse=True,
    )
    page, rest = deliveries[:per_page], deliveries[per_page:]
    headers: dict[str, str] = {}
    if rest:
        following = request.url.include_query_params(per_page=per_page, cursor=f"{CURSOR_PREFIX}{rest[0].id}")
        headers["Link"] = f'<{following}>; rel="next"'
    return JSONResponse([delivery_json(delivery) for delivery in page], headers=headers)


@router.get("/app/hook/deliveries/{delivery_id}")
async def get_delivery(
    delivery_id: str, request: Request, app: Annotated[App, Depends(authenticated_app)]
) -> dict[str, Any]:
    delivery = _delivery(state(request), app, delivery_id, GET_DOCS)
    return delivery_json(delivery) | {
        "url": delivery.url,
        "request": {"headers": delivery.headers, "payload": json.loads(delivery.body)},
        "response": {"headers": delivery.response_headers, "payload": delivery.response_body},
    }


@router.post("/app/hook/deliveries/{delivery_id}/attempts")
async def redeliver_attempt(
    delivery_id: str, request: Request, app: Annotated[App, Depends(authenticated_app)]
) -> JSONResponse:
    github = state(request)
    redeliver(github, app, _delivery(github, app, delivery_id, REDELIVER_DOCS))
    return JSONResponse({}, status_code=202)
