"""``/api/v1/threads``: list, read, start, follow up, stop, approve, and the live event stream."""

import json
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse

from services.dashboard.auth.guard import Principal
from services.dashboard.context import Dashboard
from services.dashboard.errors import responses
from services.dashboard.threads.approvals import ThreadApprovals
from services.dashboard.threads.schemas import (
    Accepted,
    ApprovalCreate,
    ApprovalResult,
    ApprovalsOut,
    MessageCreate,
    ThreadCreate,
    ThreadDetail,
    ThreadList,
    ThreadSummary,
)
from services.dashboard.threads.service import Filters, Threads
from services.dashboard.threads.sse import LAST_SEQUENCE, EncodedEvents, event_stream, start_after

STREAM_OPERATION = "follow_thread_events"


def router(dashboard: Dashboard, threads: Threads) -> APIRouter:
    guard = dashboard.guard
    heartbeat = dashboard.settings.dashboard.event_heartbeat.total_seconds()
    lifetime = dashboard.settings.dashboard.event_stream_lifetime.total_seconds()
    encoded = EncodedEvents(lambda stored: f"id: {stored.seq}\ndata: {json.dumps(threads.stream_item(stored))}\n\n")
    approvals = ThreadApprovals(threads, dashboard.approvals, dashboard.runtime.bus)
    api = APIRouter(prefix="/api/v1/threads", tags=["threads"], route_class=dashboard.api_route)
    Reader = Annotated[Principal, Depends(guard.principal)]
    Writer = Annotated[Principal, Depends(guard.writer)]

    @api.get("", responses=responses(422), summary="Threads you may see, newest first")
    async def list_threads(
        principal: Reader,
        repository: Annotated[str | None, Query(max_length=200, description="owner/name")] = None,
        channel: Annotated[str | None, Query(max_length=40)] = None,
        state: Annotated[str | None, Query(max_length=20, description="queued, running, idle, failed, stopped")] = None,
        owner: Annotated[str | None, Query(max_length=200, description="A Drydock user id")] = None,
        kind: Annotated[str | None, Query(max_length=20, description="coder, reviewer, analyzer")] = None,
        limit: Annotated[int | None, Query(ge=1, le=200)] = None,
        cursor: Annotated[str | None, Query(max_length=400)] = None,
    ) -> ThreadList:
        filters = Filters(
            repository=repository, channel=channel, state=state, owner=owner, kind=kind, limit=limit, cursor=cursor
        )
        return await threads.page(principal, filters)

    @api.post("", status_code=201, responses=responses(422, 503), summary="Start a coder thread")
    async def create_thread(principal: Writer, request: ThreadCreate) -> ThreadSummary:
        return await threads.create(principal, request)

    @api.get("/{thread_id}", responses=responses(404), summary="One thread: messages, events, PRs, sandbox")
    async def get_thread(principal: Reader, thread_id: str) -> ThreadDetail:
        return await threads.detail(principal, thread_id)

    @api.post("/{thread_id}/messages", status_code=202, responses=responses(404, 409, 503), summary="Post a follow-up")
    async def post_message(principal: Writer, thread_id: str, message: MessageCreate) -> Accepted:
        return await threads.post(principal, thread_id, message.text)

    @api.post("/{thread_id}/stop", status_code=202, responses=responses(404, 409), summary="Stop the thread's run")
    async def stop_thread(principal: Writer, thread_id: str) -> Accepted:
        return await threads.stop(principal, thread_id)

    @api.get("/{thread_id}/approvals", responses=responses(404), summary="The held plan and held pushes")
    async def get_approvals(principal: Reader, thread_id: str) -> ApprovalsOut:
        return await approvals.show(principal, thread_id)

    @api.post(
        "/{thread_id}/approve",
        responses=responses(404, 422),
        summary="Approve the held plan and held pushes (the thread's owner only)",
    )
    async def approve(principal: Writer, thread_id: str, request: ApprovalCreate) -> ApprovalResult:
        return await approvals.approve(principal, thread_id, request.change)

    @api.get(
        "/{thread_id}/events/stream",
        operation_id=STREAM_OPERATION,
        response_class=StreamingResponse,
        responses={
            200: {"content": {"text/event-stream": {}}, "description": "Server-sent events, one per run event."},
            **responses(404),
        },
        summary="The thread's run events, live (server-sent events)",
        description="The history after `after` (or `Last-Event-ID`), then each event as it happens; each "
        "event's id is its sequence. The stream ends after DRYDOCK_DASHBOARD_EVENT_STREAM_LIFETIME; reconnect "
        "with Last-Event-ID to continue (browsers' EventSource does it by itself).",
    )
    async def follow_events(
        principal: Reader,
        thread_id: str,
        after: Annotated[int, Query(ge=0, le=LAST_SEQUENCE, description="Start after this event sequence.")] = 0,
        last_event_id: Annotated[str | None, Header()] = None,
    ) -> StreamingResponse:
        await threads.may_follow(principal, thread_id)
        start = start_after(after, last_event_id)
        return event_stream(
            threads.live.follow(thread_id, after=start, heartbeat=heartbeat, lifetime=lifetime), encoded
        )

    return api
