"""Thread pages: the list with its filters and pages, starting a thread, one thread with its
follow-up, stop and approve forms, and the live fragments its script appends."""

import json
from collections.abc import AsyncIterator
from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse, StreamingResponse
from pydantic import ValidationError

from drydock.bus import EventType
from drydock.roles import Role
from drydock.threads.states import ThreadState
from services.dashboard.auth.guard import Principal
from services.dashboard.errors import Invalid
from services.dashboard.pages.common import EFFORTS, PageKit, back, field_errors
from services.dashboard.pages.forms import read_form
from services.dashboard.threads.approvals import ThreadApprovals
from services.dashboard.threads.events import StoredEvent
from services.dashboard.threads.schemas import ApprovalCreate, ThreadCreate
from services.dashboard.threads.service import Filters, Threads, changed_files, event_out
from services.dashboard.threads.sse import EncodedEvents


def routes(site: APIRouter, kit: PageKit, threads: Threads) -> None:
    dashboard, pages, guard = kit.dashboard, kit.pages, kit.dashboard.guard
    approvals = ThreadApprovals(threads, dashboard.approvals, dashboard.runtime.bus)

    @site.get("/threads")
    async def thread_list(request: Request) -> Response:
        principal = await kit.signed_in(request)
        query = request.query_params
        filters = Filters(
            repository=query.get("repository"),
            channel=query.get("channel"),
            state=query.get("state"),
            owner=principal.user_id if query.get("mine") else query.get("owner"),
            kind=query.get("kind"),
            cursor=query.get("cursor"),
        )
        listed = await threads.page(principal, filters)
        kept = {key: value for key, value in query.items() if key != "cursor" and value}
        next_url = f"/threads?{urlencode(kept | {'cursor': listed.next_cursor})}" if listed.next_cursor else None
        return kit.render(
            request, "threads.html", principal, threads=listed.threads, next_url=next_url, filters=kept,
            states=[state.value for state in ThreadState], channels=["github", "slack", "linear", "dashboard"],
            kinds=[role.value for role in Role], first_page=not query.get("cursor"),
        )  # fmt: skip

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

    @site.get("/threads/{thread_id}")
    async def thread_page(request: Request, thread_id: str) -> Response:
        principal = await kit.signed_in(request)
        detail = await threads.detail(principal, thread_id)
        last = detail.events[-1].seq if detail.events else 0
        return kit.render(
            request, "thread.html", principal, thread=detail, live_url=f"/threads/{thread_id}/live?after={last}",
            stoppable=detail.state in {ThreadState.RUNNING, ThreadState.QUEUED},
            takes_messages=detail.kind == Role.CODER, approvals=await approvals.show(principal, thread_id),
        )  # fmt: skip

    @site.get("/threads/{thread_id}/live")
    async def thread_live(request: Request, thread_id: str, after: int = 0) -> Response:
        principal = await kit.signed_in(request)
        await threads.may_follow(principal, thread_id)
        last_event_id = request.headers.get("last-event-id", "")
        after = int(last_event_id) if last_event_id.isdigit() else max(after, 0)
        heartbeat = dashboard.settings.dashboard.event_heartbeat.total_seconds()
        lifetime = dashboard.settings.dashboard.event_stream_lifetime.total_seconds()

        async def body() -> AsyncIterator[str]:
            yield "retry: 1000\n\n"
            async for stored in threads.live.follow(thread_id, after=after, heartbeat=heartbeat, lifetime=lifetime):
                if stored is None:
                    yield ": keep-alive\n\n"
                    continue
                yield encoded(stored)

        return StreamingResponse(
            body(), media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        )

    def fragment(stored: StoredEvent) -> str:
        event = event_out(stored)
        url = str(event.data.get("url") or "")
        item = {
            "seq": event.seq,
            "state": event.state,
            "html": pages.fragment("event.html", event=event),
            "files": changed_files([stored]),
            "pull_request": url if "/pull/" in url else None,
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
