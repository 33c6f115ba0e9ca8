"""Threads for people: the list (filters, pages, only what the reader may see), one thread with
its messages, events, pull requests, sandbox and changed files, and the three things a person
does to a thread: start one, post a follow-up, stop its run.

Who sees a thread: its owner, people who may see its repository on GitHub, administrators (all).
Whoever sees a thread may post to it and stop it. Starting one needs a repository enabled for the
coder that the person may see. A thread started here is a coder thread on the ``dashboard``
channel with a fresh uuid4 id; its messages and wake travel like any other (:func:`hand_off`).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from drydock.accounts import repository_name
from drydock.bus import BusUnavailable, RunEvent
from drydock.bus.envelopes import Author, Channel, InboxMessage, ReplyAddress, Trigger
from drydock.channels.errors import OutboundFailed
from drydock.roles import Role
from drydock.sandbox.sentinel import PREFIX as CREATING
from drydock.threads import Inbox, ids
from drydock.threads.changes import ThreadChanges
from drydock.threads.continuation import Continuations
from drydock.threads.fields import EFFORT, MODEL, TITLE, new_thread_fields
from drydock.threads.handoff import hand_off
from drydock.threads.index import InvalidCursor, ThreadQuery, Visibility
from drydock.threads.metadata import ThreadMetadata
from drydock.threads.pr_records import PullRequestRecord
from drydock.threads.states import EVENT_OUTCOMES, EVENT_STATES, ThreadState
from drydock.usage.ledger import UsageLedger, UsageTotals
from services.dashboard.auth.guard import Principal
from services.dashboard.choices import blank_to_none, model_errors
from services.dashboard.context import Dashboard
from services.dashboard.errors import Conflict, FieldError, Forbidden, Invalid, NotFound
from services.dashboard.threads.events import StoredEvent, ThreadEvents
from services.dashboard.threads.fanout import EventFanout
from services.dashboard.threads.pull_checks import PullChecks
from services.dashboard.threads.schemas import (
    Accepted,
    AutofixOut,
    ChangesOut,
    EventOut,
    MessageOut,
    PullRequestOut,
    SandboxOut,
    ThreadCreate,
    ThreadDetail,
    ThreadList,
    ThreadSummary,
)

_FILE_PATH = re.compile(r'"file_path":\s*"((?:[^"\\]|\\.)+)"')
WRITING_TOOLS = frozenset({"write_file", "edit_file"})
MESSAGES_LIMIT = 500


class Filters:
    """A list request's filters, as the API and the page take them."""

    def __init__(
        self,
        *,
        repository: str | None = None,
        channel: str | None = None,
        state: str | None = None,
        owner: str | None = None,
        kind: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> None:
        self.repository = blank_to_none(repository)
        self.channel = blank_to_none(channel)
        self.state = blank_to_none(state)
        self.owner = blank_to_none(owner)
        self.kind = blank_to_none(kind)
        self.limit = limit
        self.cursor = blank_to_none(cursor)

    def admits(self, thread: ThreadSummary) -> bool:
        """Whether the thread matches these filters (for threads that appear in a live list)."""
        wanted = {
            "kind": self.kind, "channel": self.channel, "repository": self.repository, "owner": self.owner,
            "state": self.state,
        }  # fmt: skip
        return all(value is None or getattr(thread, name) == value for name, value in wanted.items())


def title_of(thread: ThreadMetadata) -> str:
    if thread.title:
        return thread.title
    address = thread.reply_to.address if thread.reply_to is not None else {}
    if thread.channel is Channel.GITHUB and address.get("number"):
        return f"{address.get('repository', thread.repository or '')}#{address['number']}"
    if thread.channel is Channel.SLACK and address.get("channel"):
        return f"Slack thread in {address['channel']}"
    if thread.channel is Channel.LINEAR and address.get("issue_id"):
        return f"Linear issue {address['issue_id']}"
    return f"{thread.kind} on {thread.repository}" if thread.repository else f"{thread.kind} thread"


def newest(pull_requests: list[PullRequestOut]) -> PullRequestOut | None:
    return max(pull_requests, key=lambda pr: pr.number, default=None)


def summary(
    thread: ThreadMetadata, logins: dict[str, str], pull_request: PullRequestOut | None = None
) -> ThreadSummary:
    return ThreadSummary(
        id=thread.thread_id,
        kind=thread.kind.value,
        channel=thread.channel.value if thread.channel is not None else None,
        repository=thread.repository,
        owner=thread.owner,
        owner_login=logins.get(thread.owner) if thread.owner else None,
        state=thread.state.value if thread.state is not None else None,
        outcome=thread.outcome,
        title=title_of(thread),
        created_at=thread.created_at,
        last_activity=thread.last_activity or thread.created_at,
        pull_request=pull_request,
        model=thread.model,
        effort=thread.effort,
    )


def as_of(thread: ThreadSummary, event: RunEvent) -> ThreadSummary:
    """The thread's entry with what ``event`` changes, which the worker records in Redis just
    after publishing it: a list following the events must not show the state before it."""
    state = EVENT_STATES.get(event.type)
    if state is None:
        return thread
    outcome = EVENT_OUTCOMES.get(event.type)
    return thread.model_copy(
        update={"state": state.value, "outcome": outcome or thread.outcome, "last_activity": event.at}
    )


def event_out(stored: StoredEvent) -> EventOut:
    state = EVENT_STATES.get(stored.event.type)
    return EventOut(
        seq=stored.seq,
        type=stored.event.type.value,
        run_id=stored.event.run_id,
        at=stored.event.at,
        data=stored.event.data,
        state=state.value if state is not None else None,
    )


def changed_files(events: list[StoredEvent]) -> list[str]:
    """The files the agent's ``write_file`` and ``edit_file`` calls named, in order, once each."""
    found: dict[str, None] = {}
    for stored in events:
        data = stored.event.data
        for name, arguments in zip(data.get("tool_calls") or [], data.get("arguments") or [], strict=False):
            if name in WRITING_TOOLS and isinstance(arguments, str):
                match = _FILE_PATH.search(arguments)
                if match:
                    found[json.loads(f'"{match.group(1)}"')] = None
    return list(found)


class Threads:
    def __init__(self, dashboard: Dashboard) -> None:
        self._d = dashboard
        self.events = ThreadEvents(dashboard.runtime.bus.js)
        self.live = EventFanout(self.events)
        self._inbox = Inbox(dashboard.runtime.bus)
        self.changes = ThreadChanges(dashboard.runtime.redis, dashboard.runtime.keys)
        self._usage = UsageLedger(dashboard.runtime.redis, dashboard.runtime.keys)
        self.checks = PullChecks(dashboard.github_api)
        self._backfilled = False

    async def _visibility(self, principal: Principal) -> Visibility | None:
        if principal.admin:
            return None
        return Visibility(principal.user_id, await self._d.access.of(principal.session))

    async def _may_see(self, principal: Principal, thread: ThreadMetadata) -> bool:
        return await self._d.access.may_see_thread(principal.session, thread.owner, thread.repository)

    async def visible(self, principal: Principal, thread_id: str) -> ThreadMetadata:
        """The thread's metadata; :class:`NotFound` or :class:`Forbidden`."""
        return await self._visible(principal, thread_id)

    async def _visible(self, principal: Principal, thread_id: str) -> ThreadMetadata:
        """The thread's metadata; :class:`NotFound` or :class:`Forbidden`."""
        thread = await self._d.metadata.find(thread_id) if _is_id(thread_id) else None
        if thread is None:
            raise NotFound(f"no thread {thread_id}")
        if not await self._may_see(principal, thread):
            raise Forbidden("you may not see this thread: it is not yours and you cannot see its repository")
        return thread

    async def page(self, principal: Principal, filters: Filters) -> ThreadList:
        if not self._backfilled:
            await self._d.index.backfill(self._d.metadata.scan())
            self._backfilled = True
        if filters.state is not None and filters.state not in {state.value for state in ThreadState}:
            raise Invalid.field(("query", "state"), f"{filters.state!r} is not one of {', '.join(ThreadState)}")
        query = ThreadQuery(
            kind=filters.kind,
            channel=filters.channel,
            repository=filters.repository,
            owner=filters.owner,
            state=filters.state,
            visible_to=await self._visibility(principal),
            limit=filters.limit or self._d.settings.dashboard.page_size,
            cursor=filters.cursor,
        )
        try:
            page = await self._d.index.list(query)
        except InvalidCursor as error:
            raise Invalid.field(("query", "cursor"), str(error)) from None
        found = await self._d.metadata.find_many(page.thread_ids)
        rows = [found[thread_id] for thread_id in page.thread_ids if thread_id in found]
        logins = await self._logins([thread.owner for thread in rows])
        records = await self._d.records.of_threads([thread.thread_id for thread in rows])
        return ThreadList(
            threads=[
                summary(thread, logins, newest([self._pull_request(r) for r in records[thread.thread_id]]))
                for thread in rows
            ],
            next_cursor=page.next_cursor,
        )

    def _pull_request(self, record: PullRequestRecord) -> PullRequestOut:
        web = self._d.settings.dashboard.github_web_url or f"https://{self._d.settings.github.host}"
        return PullRequestOut(
            repository=record.repository,
            number=record.number,
            url=f"{web}/{record.repository}/pull/{record.number}",
            state=record.state.value,
            branch=record.branch,
        )

    async def row(self, principal: Principal, thread_id: str) -> ThreadSummary | None:
        """One thread's list entry, for the live list; ``None`` if it is gone or not for this person."""
        thread = await self._d.metadata.find(thread_id) if _is_id(thread_id) else None
        if thread is None or not await self._may_see(principal, thread):
            return None
        logins = await self._logins([thread.owner])
        pull_requests = [self._pull_request(record) for record in await self._d.records.of_thread(thread_id)]
        return summary(thread, logins, newest(pull_requests))

    async def _logins(self, user_ids: list[str | None]) -> dict[str, str]:
        wanted = sorted({user_id for user_id in user_ids if user_id})
        identities = await self._d.accounts.identities(wanted) if wanted else {}
        return {user_id: identity.login for user_id, identity in identities.items()}

    async def detail(self, principal: Principal, thread_id: str) -> ThreadDetail:
        thread = await self._visible(principal, thread_id)
        events = await self.events.history(thread_id)
        messages = (await self._inbox.read_after(thread_id))[-MESSAGES_LIMIT:]
        records = await self._d.records.of_thread(thread_id)
        pull_requests = [self._pull_request(record) for record in records]
        logins = await self._logins([thread.owner])
        changes = await self.changes.get(thread_id)
        return ThreadDetail(
            **summary(thread, logins, newest(pull_requests)).model_dump(),
            messages=[
                MessageOut(
                    seq=stored.seq,
                    author=stored.message.author.name,
                    channel=stored.message.channel.value,
                    text=stored.message.text,
                    received_at=stored.message.received_at,
                )
                for stored in messages
            ],
            events=[event_out(stored) for stored in events],
            pull_requests=[
                await self._with_checks(await self._with_autofix(thread, record, pull_request))
                for record, pull_request in zip(records, pull_requests, strict=True)
            ],
            sandbox=await self._sandbox(thread.sandbox_id or ""),
            changed_files=[change.path for change in changes.files] if changes else changed_files(events),
            changes=ChangesOut.model_validate(asdict(changes)) if changes else None,
            stop_requested=await self._d.stops.pending(thread_id),
            budget_pause=await self._budget_pause(thread_id),
        )

    async def _budget_pause(self, thread_id: str) -> str | None:
        paused = await Continuations(self._d.runtime.redis, self._d.runtime.keys).paused(thread_id)
        return f"Paused at {paused.limit_text}: {paused.spent_text}." if paused is not None else None

    async def _with_autofix(
        self, thread: ThreadMetadata, record: PullRequestRecord, pull_request: PullRequestOut
    ) -> PullRequestOut:
        enablement = await self._d.enablements.of(thread.owner, record.host, record.repository, record.number)
        autofix = AutofixOut(enabled=enablement.enabled, reason=enablement.reason)
        return pull_request.model_copy(update={"autofix": autofix})

    async def _with_checks(self, recorded: PullRequestOut) -> PullRequestOut:
        """The pull request as GitHub has it now, with its checks, where the App may read them."""
        if not self.checks.configured:
            return recorded
        try:
            status = await self.checks.of(recorded.repository, recorded.number)
        except OutboundFailed as failure:
            return recorded.model_copy(update={"checks_error": str(failure)})
        return recorded.model_copy(update={"checks": status.checks, "state": status.state})

    async def run_usage(self, run_ids: list[str]) -> dict[str, UsageTotals]:
        """Each run's usage as the ledger recorded it (none for a run it no longer keeps)."""
        return {run_id: await self._usage.run(run_id) for run_id in run_ids}

    async def _sandbox(self, sandbox_id: str) -> SandboxOut:
        if not sandbox_id:
            return SandboxOut(status="none")
        if sandbox_id.startswith(CREATING):
            return SandboxOut(status="creating")
        handle = await self._d.sandboxes.get(sandbox_id)
        if handle is None:
            return SandboxOut(status="gone", id=sandbox_id)
        last_used = await self._d.sandboxes.last_used(sandbox_id)
        return SandboxOut(
            status="ready",
            id=sandbox_id,
            provider=handle.provider,
            isolation=handle.isolation,
            created_at=handle.created_at,
            last_used_at=datetime.fromtimestamp(last_used, UTC) if last_used is not None else None,
        )

    async def create(self, principal: Principal, request: ThreadCreate) -> ThreadSummary:
        """Start a coder thread on ``request.repository`` with the prompt; :class:`Invalid`,
        :class:`Forbidden`."""
        model, effort = blank_to_none(request.model), blank_to_none(request.effort)
        errors = model_errors(self._d.catalog, model, effort, at=("body",))
        settings = None
        try:
            repository = repository_name(request.repository.strip())
        except ValueError as error:
            errors.insert(0, FieldError(loc=["body", "repository"], msg=str(error)))
        else:
            settings = await self._d.accounts.repository(repository)
            if settings is None or not settings.coder:
                reason = f"{repository} is not enabled for the coder (an administrator enables it under Repositories)"
                errors.insert(0, FieldError(loc=["body", "repository"], msg=reason))
        if errors:
            raise Invalid(errors)
        assert settings is not None
        if not await self._d.access.may_see(principal.session, settings.full_name):
            raise Forbidden(f"you cannot see {settings.full_name} on GitHub")
        thread_id = ids.dashboard()
        message = self._message(principal, thread_id, request.prompt, settings.full_name)
        fields = new_thread_fields(message, created_by="dashboard") | {
            TITLE: request.prompt.strip().splitlines()[0][:120],
            **({MODEL: model} if model else {}),
            **({EFFORT: effort} if effort else {}),
        }
        await self._d.metadata.create(thread_id, kind=Role.CODER, fields=fields)
        await self._d.states.set(thread_id, ThreadState.QUEUED)
        try:
            await hand_off(self._d.runtime.bus, self._d.metadata, Role.CODER, message)
        except BusUnavailable:
            # The thread exists but its message does not: it must not look queued forever.
            await self._d.states.set(thread_id, ThreadState.FAILED)
            raise
        logins = {principal.user_id: principal.session.login}
        return summary(await self._d.metadata.get(thread_id), logins)

    def _message(self, principal: Principal, thread_id: str, text: str, repository: str | None) -> InboxMessage:
        return InboxMessage(
            delivery_id=f"dashboard:{uuid.uuid4().hex}",
            thread_id=thread_id,
            channel=Channel.DASHBOARD,
            author=Author(
                channel=Channel.DASHBOARD,
                external_id=principal.user_id,
                name=principal.session.login,
                user_id=principal.user_id,
            ),
            text=text,
            repository=repository,
            reply_to=ReplyAddress(channel=Channel.DASHBOARD, address={"thread_id": thread_id}),
            trigger=Trigger.DIRECT,
        )

    async def post(self, principal: Principal, thread_id: str, text: str) -> Accepted:
        """A follow-up from the dashboard; the thread's run picks it up, or a new run starts."""
        thread = await self._visible(principal, thread_id)
        if thread.kind is not Role.CODER:
            raise Conflict(f"a {thread.kind} thread takes no messages from the dashboard")
        message = self._message(principal, thread_id, text, thread.repository)
        await self._d.states.set(thread_id, ThreadState.QUEUED, unless=[ThreadState.RUNNING])
        await hand_off(self._d.runtime.bus, self._d.metadata, Role.CODER, message)
        state = await self._d.states.get(thread_id)
        return Accepted(thread_id=thread_id, state=state.value if state is not None else None)

    async def stop(self, principal: Principal, thread_id: str) -> Accepted:
        """Ask the thread's run to stop; :class:`Conflict` when no run is queued or going on."""
        state = (await self._visible(principal, thread_id)).state
        if state not in {ThreadState.RUNNING, ThreadState.QUEUED}:
            raise Conflict(f"the thread has no run to stop (it is {state or 'new'})")
        await self._d.stops.request(thread_id, by=principal.session.login)
        return Accepted(thread_id=thread_id, state=state.value if state is not None else None)

    async def may_follow(self, principal: Principal, thread_id: str) -> None:
        """:class:`NotFound` or :class:`Forbidden` unless the person may watch the thread's events."""
        await self._visible(principal, thread_id)

    @staticmethod
    def stream_item(stored: StoredEvent) -> dict[str, Any]:
        return event_out(stored).model_dump(mode="json")


def _is_id(thread_id: str) -> bool:
    try:
        uuid.UUID(thread_id)
    except ValueError:
        return False
    return True
