"""Thread pages: the list with its filters and pages, starting a thread, one thread with its
follow-up, stop and approve forms, and the live fragments its script appends."""

import json
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse, StreamingResponse
from pydantic import ValidationError

from drydock.bus import EventType
from drydock.roles import Role
from drydock.threads.states import EVENT_STATES, ThreadState
from services.dashboard.auth.guard import Principal
from services.dashboard.errors import Invalid
from services.dashboard.pages.common import EFFORTS, PageKit, back, field_errors
from services.dashboard.pages.forms import read_form
from services.dashboard.threads.approvals import ThreadApprovals
from services.dashboard.threads.diff_view import file_diffs
from services.dashboard.threads.events import StoredEvent
from services.dashboard.threads.schemas import ApprovalCreate, EventOut, ThreadCreate, ThreadDetail, ThreadSummary
from services.dashboard.threads.service import Filters, Threads, as_of, changed_files, event_out
from services.dashboard.threads.sse import EncodedEvents, event_stream, start_after
from services.dashboard.threads.timeline import END_TYPES, Run, shown, step_of, timeline

SECTIONS = {
    "timeline": "thread_timeline.html",
    "changes": "thread_changes.html",
    "files": "thread_files.html",
    "pulls": "thread_pulls.html",
}
"""The page's parts its script replaces when a run ends, by element: ``#timeline``, ``#changes``,
``#changed-files``, ``#pull-requests-section``."""


QUEUED = "Waiting for the agent to start…"


def working(event: EventOut) -> str | None:
    """What the working indicator says after ``event`` of a run: None once the run ended."""
    if event.type in END_TYPES:
        return None
    calls = event.data.get("tool_calls") if event.type == EventType.MODEL_CALL else None
    if calls:
        return f"Running {', '.join(str(call) for call in calls)}…"
    return "Thinking…"


LIST_EVENTS = frozenset({*EVENT_STATES, EventType.MESSAGE_POSTED})
"""The run events that change a thread's row in the list (its state, outcome, pull request)."""


def routes(site: APIRouter, kit: PageKit, threads: Threads) -> None:
    dashboard, pages, guard = kit.dashboard, kit.pages, kit.dashboard.guard
    approvals = ThreadApprovals(threads, dashboard.approvals, dashboard.runtime.bus)

    def list_filters(request: Request, principal: Principal) -> Filters:
        query = request.query_params
        return Filters(
            repository=query.get("repository"),
            channel=query.get("channel"),
            state=query.get("state"),
            owner=principal.user_id if query.get("mine") else query.get("owner"),
            kind=query.get("kind"),
            cursor=query.get("cursor"),
        )

    @site.get("/threads")
    async def thread_list(request: Request) -> Response:
        principal = await kit.signed_in(request)
        query = request.query_params
        listed = await threads.page(principal, list_filters(request, principal))
        kept = {key: value for key, value in query.items() if key != "cursor" and value}
        next_url = f"/threads?{urlencode(kept | {'cursor': listed.next_cursor})}" if listed.next_cursor else None
        first_page = not query.get("cursor")
        live = {"ids": ",".join(thread.id for thread in listed.threads)} | kept | ({"new": "1"} if first_page else {})
        return kit.render(
            request, "threads.html", principal, threads=listed.threads, next_url=next_url, filters=kept,
            states=[state.value for state in ThreadState], channels=["github", "slack", "linear", "dashboard"],
            kinds=[role.value for role in Role], first_page=first_page, live_url=f"/threads/live?{urlencode(live)}",
        )  # fmt: skip

    @site.get("/threads/live")
    async def thread_list_live(request: Request, ids: str = "", new: str = "") -> Response:
        """The list's rows as they change (server-sent events): on connecting, every listed row as
        it is now; then a row each time one of its threads starts or ends a run or posts, and on
        the first page (``new``) the threads that appear and match the filters."""
        principal = await kit.signed_in(request)
        filters = list_filters(request, principal)
        known = {thread_id for thread_id in ids.split(",")[: 2 * dashboard.settings.dashboard.page_size] if thread_id}
        heartbeat = dashboard.settings.dashboard.event_heartbeat.total_seconds()
        lifetime = dashboard.settings.dashboard.event_stream_lifetime.total_seconds()

        def item(thread: ThreadSummary, *, added: bool = False) -> str:
            html = pages.fragment("thread_row.html", thread=thread)
            return f"event: thread\ndata: {json.dumps({'id': thread.id, 'new': added, 'html': html})}\n\n"

        async def body() -> AsyncIterator[str]:
            yield "retry: 1000\n\n"
            deadline = time.monotonic() + lifetime
            async with threads.events.every_thread() as feed:
                for thread_id in sorted(known):
                    row = await threads.row(principal, thread_id)
                    if row is not None:
                        yield item(row)
                while (left := deadline - time.monotonic()) > 0:
                    stored = await feed.next(min(heartbeat, left))
                    if stored is None:
                        yield ": keep-alive\n\n"
                        continue
                    event = stored.event
                    if event.type not in LIST_EVENTS or (event.thread_id not in known and not new):
                        continue
                    row = await threads.row(principal, event.thread_id)
                    if row is None:
                        continue
                    row = as_of(row, event)
                    if event.thread_id in known:
                        yield item(row)
                    elif filters.admits(row):
                        known.add(event.thread_id)
                        yield item(row, added=True)

        return StreamingResponse(
            body(), media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        )

    async def new_thread_form(
        request: Request, principal: Principal, *, errors: dict[str, str], values: dict[str, str], status: int = 200
    ) -> Response:
        enabled = [repo for repo in await dashboard.accounts.repositories() if repo.coder]
        visible = [
            repo.full_name for repo in enabled if await dashboard.access.may_see(principal.session, repo.full_name)
        ]
        profile = await dashboard.accounts.profile(principal.user_id)
        return kit.render(
            request, "new_thread.html", principal, status, repositories=visible, models=list(dashboard.catalog.ids),
            efforts=EFFORTS, errors=errors,
            values={"repository": profile.default_repository or "", **values},
        )  # fmt: skip

    @site.get("/threads/new")
    async def new_thread(request: Request) -> Response:
        principal = await kit.signed_in(request)
        return await new_thread_form(request, principal, errors={}, values={})

    @site.post("/threads/new")
    async def create_thread(request: Request) -> Response:
        principal = await kit.signed_in(request)
        form = await read_form(request, guard, principal)
        values = {name: form.text(name) for name in ("repository", "prompt", "model", "effort")}
        try:
            created = await threads.create(
                principal,
                ThreadCreate(
                    repository=values["repository"], prompt=values["prompt"], model=form.optional("model"),
                    effort=form.optional("effort"),
                ),
            )  # fmt: skip
        except Invalid as invalid:
            return await new_thread_form(request, principal, errors=invalid.by_field(), values=values, status=422)
        except ValueError as error:
            return await new_thread_form(request, principal, errors=field_errors(error), values=values, status=422)
        return RedirectResponse(f"/threads/{created.id}", status_code=303)

    async def conversation(detail: ThreadDetail) -> dict[str, Any]:
        """What the conversation's templates need: the timeline, the diff, the working indicator."""
        usage = await threads.run_usage(sorted({event.run_id for event in detail.events}))
        entries = timeline(detail.messages, detail.events, usage)
        runs = [entry.run for entry in entries if entry.run is not None]
        return {
            "thread": detail,
            "timeline": entries,
            "diffs": file_diffs(detail.changes) if detail.changes else [],
            "changes": detail.changes,
            "working": working(runs[-1].events[-1])
            if runs and runs[-1].end is None
            else (QUEUED if detail.state == ThreadState.QUEUED else None),
        }

    @site.get("/threads/{thread_id}")
    async def thread_page(request: Request, thread_id: str) -> Response:
        principal = await kit.signed_in(request)
        detail = await threads.detail(principal, thread_id)
        last = detail.events[-1].seq if detail.events else 0
        return kit.render(
            request, "thread.html", principal, live_url=f"/threads/{thread_id}/live?after={last}",
            stoppable=detail.state in {ThreadState.RUNNING, ThreadState.QUEUED},
            takes_messages=detail.kind == Role.CODER, approvals=await approvals.show(principal, thread_id),
            **await conversation(detail),
        )  # fmt: skip

    @site.get("/threads/{thread_id}/sections")
    async def thread_sections(request: Request, thread_id: str) -> Response:
        """The page's parts that change when a run ends, for its script to put in place."""
        principal = await kit.signed_in(request)
        context = await conversation(await threads.detail(principal, thread_id))
        parts = {name: pages.fragment(template, **context) for name, template in SECTIONS.items()}
        detail: ThreadDetail = context["thread"]
        last_seq = detail.events[-1].seq if detail.events else 0
        return JSONResponse(
            parts | {"state": detail.state, "last_seq": last_seq}, headers={"Cache-Control": "no-store"}
        )

    @site.get("/threads/{thread_id}/live")
    async def thread_live(request: Request, thread_id: str, after: int = 0) -> Response:
        principal = await kit.signed_in(request)
        await threads.may_follow(principal, thread_id)
        start = start_after(after, request.headers.get("last-event-id"))
        heartbeat = dashboard.settings.dashboard.event_heartbeat.total_seconds()
        lifetime = dashboard.settings.dashboard.event_stream_lifetime.total_seconds()
        return event_stream(
            threads.live.follow(thread_id, after=start, heartbeat=heartbeat, lifetime=lifetime), encoded
        )

    def fragment(stored: StoredEvent) -> str:
        event = event_out(stored)
        if event.type == EventType.STARTED:
            html = pages.fragment("thread_run.html", run=Run(run_id=event.run_id, number=0, events=[event]))
        else:
            html = pages.fragment("thread_step.html", step=step_of(event)) if shown(event) else ""
        item = {
            "seq": event.seq,
            "run": event.run_id,
            "type": event.type,
            "state": event.state,
            "html": html,
            "ended": event.type in END_TYPES,
            "working": working(event),
            "files": changed_files([stored]),
            "sandbox": event.data.get("sandbox_id") if event.type == EventType.STARTED else None,
        }
        return f"id: {stored.seq}\nevent: run\ndata: {json.dumps(item)}\n\n"

    encoded = EncodedEvents(fragment)

    @site.post("/threads/{thread_id}/messages")
    async def post_message(request: Request, thread_id: str) -> Response:
        principal = await kit.signed_in(request)
        form = await read_form(request, guard, principal)
        text = form.text("text").strip()
        if not text:
            raise Invalid.field(("body", "text"), "write a message first")
        await threads.post(principal, thread_id, text[:20_000])
        return back(f"/threads/{thread_id}", "Message sent.")

    @site.post("/threads/{thread_id}/approve")
    async def approve(request: Request, thread_id: str) -> Response:
        principal = await kit.signed_in(request)
        form = await read_form(request, guard, principal)
        change = form.optional("change")
        try:
            result = await approvals.approve(principal, thread_id, ApprovalCreate(change=change).change)
        except ValidationError as error:
            raise Invalid.field(
                ("body", "change"), f"not a held push's change id: {error.errors()[0]['msg']}"
            ) from None
        approved = (["the plan"] if result.plan else []) + [f"push {c[:12]}" for c in result.pushes]
        return back(f"/threads/{thread_id}", f"Approved {', '.join(approved)}." if approved else "Nothing was waiting.")

    @site.post("/threads/{thread_id}/stop")
    async def stop_thread(request: Request, thread_id: str) -> Response:
        principal = await kit.signed_in(request)
        await read_form(request, guard, principal)
        await threads.stop(principal, thread_id)
        return back(f"/threads/{thread_id}", "Stop requested: the run ends after its current step.")
