"""One thread run of an agent role, between taking the lease and releasing it (steps 2 and 3 of
the run loop in DESIGN.md section 3).

Per run: read the thread's metadata, resolve the model (thread, user, team, installation),
ensure the sandbox and the repository's checkout, build the role's tools and a fresh agent
from the role's graph factory, and run it against the thread's checkpoint. A run interrupted by
a crash is resumed from its last checkpoint (the next step of the graph is still pending);
otherwise a new turn starts, and the inbox middleware injects what arrived since the last one.
Roles differ only through their :class:`RoleHooks`: a preparation after the checkout (the
reviewer's pull request head, the analyzer's evidence), turns that start with the inbox's
messages (for graphs without the inbox middleware), and whether the checkout is snapshotted.

What a run did is published as run events, which also set the thread's state
(:mod:`drydock.threads.states`). A stop request (:mod:`drydock.threads.stops`) ends a run between
graph steps (checked at most every :data:`STOP_POLL` seconds, and once more when the graph ends)
with a ``stopped`` event and the source's indicator showing it; the messages queued before the
stop count as answered, so nothing starts the run again until a new one arrives. Failures
a person can act on (no model configured, a model choice the catalog rejects, the model endpoint
failing for good, a repository that cannot be cloned, the sandbox circuit breaker) end the run
with a notice in the source conversation and an ``error`` event; they are not retried, since
retrying cannot fix them. A clone that fails while the proxy or the store behind it recovers is
retried (:mod:`drydock.worker.clone_retries`) and, if the outage lasts, fails the run for a
redelivery instead.
Failures of our own infrastructure raise, so the wake is redelivered with backoff.

Budgets (:mod:`drydock.worker.budget_gate`) are passed after the model is resolved and before
the sandbox: a paused thread, a spent day budget or a full team refuses or defers the run
before any sandbox exists. A run the step-limit middleware stopped at a spend limit pauses its
(coder) thread and tells the source how to continue.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shlex
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import httpx
import structlog
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from nats.js.api import PubAck
from redis.exceptions import RedisError

from drydock.accounts import UserProfile
from drydock.accounts.store import AccountsStore
from drydock.budgets import ActiveRuns, Limits, Reached, SpendCheck
from drydock.bus import Bus, EventType, RunEvent
from drydock.bus.envelopes import ReplyAddress
from drydock.channels.outbound import Outbound
from drydock.channels.run_status import RunStatus
from drydock.checkpoints import DrydockRedisSaver
from drydock.config import Settings
from drydock.errors import describe
from drydock.graphs.entrypoints import with_inputs
from drydock.graphs.inputs import AgentInputs, GraphFactory
from drydock.infra.redis import Keys
from drydock.middleware import EmptyReplies, RunLimits, StopReason, stop_reason
from drydock.middleware.inbox_injection import inbox_message_id, inbox_message_text
from drydock.middleware.outcome import BUDGET_KEY
from drydock.model_catalog import PriceTable
from drydock.models import ModelChoice, ModelError, Models, ResolvedModel
from drydock.redaction import Redactor
from drydock.roles import Role
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.errors import SandboxError
from drydock.sandbox.lifecycle import SandboxManager
from drydock.sandbox.snapshots import SnapshotStore
from drydock.threads import Inbox, Lease
from drydock.threads.approvals import PlanGate
from drydock.threads.changes import ThreadChanges, diff_script, parse
from drydock.threads.checkout import Checkout
from drydock.threads.continuation import Continuations
from drydock.threads.fields import EFFORT, MODEL, OWNER, REPLY_TO, REPOSITORY, STATE
from drydock.threads.inbox import InboxWatch
from drydock.threads.metadata import ThreadMetadataStore
from drydock.threads.scope import ThreadScope
from drydock.threads.states import ThreadState, ThreadStates
from drydock.threads.stops import StopRequests
from drydock.tools import build_tools
from drydock.tools.context import ToolContext
from drydock.usage import UsageLedger, UsageRecorder, UsageScope
from drydock.usage.recorder import METADATA_KEY as USAGE_METADATA_KEY
from drydock.worker.budget_gate import BudgetGate, RunRefused, paused_notice, stopped_notice
from drydock.worker.clone_retries import clone_with_retries
from drydock.worker.sources import SourceNotices, SourceStatus

log = structlog.get_logger(__name__)

NO_MODEL_NOTICE = (
    "I can't work on this yet: no model endpoint is configured for Drydock. An administrator sets "
    "DRYDOCK_MODELS_API_KEY (OpenAI) or DRYDOCK_MODELS_BASE_URL (any OpenAI-compatible endpoint) "
    "and restarts the workers; then mention me again."
)
CIRCUIT_OPEN_NOTICE = (
    "I stopped: my sandbox failed {count} times in a row, so I am not retrying for now. Reply here to try again later."
)
RECURSION_LIMIT = 10_000
"""Graph steps per run; the model-call limit (middleware 2) ends runs long before this."""
PENDING_EVENTS = 64
"""Step events published at most before their acknowledgements are awaited."""
STOP_POLL = 0.25
"""Seconds between two checks for a stop request while a run's steps go by."""


class RunEnded(Exception):
    """A run ended early for a reason told to the source conversation; the wake is done."""


class RunSkipped(Exception):
    """A role's preparation found nothing to do (e.g. no new evidence): the run completes
    without calling the model."""


@dataclass(frozen=True)
class RunSetup:
    """What a run has prepared before its tools and agent are built."""

    scope: ThreadScope
    backend: SandboxBackend
    checkout: Checkout | None
    parts: RunParts


Prepare = Callable[[RunSetup], Awaitable[RunSetup]]
"""A role's preparation: given the sandbox and the default-branch checkout, returns the setup the
agent is built with (e.g. the reviewer's checkout at the pull request's head). May raise
:class:`RunEnded` or :class:`RunSkipped`."""


@dataclass(frozen=True)
class RoleHooks:
    """Where a role's runs differ from the coder's; the defaults are the coder's."""

    prepare: Prepare | None = None
    inbox_at_start: bool = False
    """The role's graph has no inbox middleware: a new turn starts with the messages queued
    since the checkpoint's cursor (and a turn with none is not run)."""
    snapshots: bool = True
    """Snapshot the checkout after each turn; off where the checkout can always be re-derived."""
    changes: bool = True
    """Record the checkout's changes (files and diff) for the dashboard before each run's end event."""


@dataclass(frozen=True)
class RunParts:
    """What every run of a worker process shares."""

    role: Role
    factory: GraphFactory
    tool_names: Sequence[str]
    settings: Settings
    bus: Bus
    redis: Any
    keys: Keys
    sandboxes: SandboxManager
    checkpointer: BaseCheckpointSaver[Any]
    outbound: Outbound
    models: Models
    http: httpx.AsyncClient
    snapshots: SnapshotStore | None = None
    """Saves the checkout at the end of each turn, so a recreated sandbox gets unpushed work back."""
    hooks: RoleHooks = field(default_factory=RoleHooks)


class AgentRuns:
    """The ``run`` of a :class:`~drydock.worker.thread_runner.ThreadRunner`: runs one thread's
    agent to the end of its turn and returns the inbox cursor after it."""

    def __init__(self, parts: RunParts) -> None:
        self.parts = parts
        self.inbox = Inbox(parts.bus)
        self.metadata = ThreadMetadataStore(parts.redis, parts.keys)
        self.accounts = AccountsStore(parts.redis, parts.keys, host=parts.settings.github.host)
        self.states = ThreadStates(parts.redis, parts.keys)
        self.stops = StopRequests(parts.redis, parts.keys)
        self.plan_gate = PlanGate.create(parts.redis, parts.keys, parts.settings)
        worker = parts.settings.worker
        self.limits = RunLimits(model_calls=worker.step_limit, sandbox_failures=worker.sandbox_failure_limit)
        models = parts.settings.models
        self.usage = UsageLedger(parts.redis, parts.keys, retention_days=models.usage_retention_days)
        self.prices = PriceTable.from_settings(parts.settings)
        self.redactor = Redactor.from_settings(parts.settings)
        self.continuations = Continuations(parts.redis, parts.keys)
        self.gate = BudgetGate(
            self.accounts,
            self.continuations,
            ActiveRuns(parts.redis, parts.keys),
            self.stops,
            admin_logins=parts.settings.dashboard.admin_logins,
        )
        self.changes = ThreadChanges(parts.redis, parts.keys)

    async def __call__(self, thread_id: str, lease: Lease) -> int:
        fields = await self.metadata.get(thread_id)
        scope = ThreadScope(
            thread_id=thread_id,
            run_id=uuid.uuid4().hex,
            role=self.parts.role,
            repository=fields.get(REPOSITORY) or None,
            reply_to=ReplyAddress.model_validate_json(fields[REPLY_TO]),
            user_id=fields.get(OWNER) or None,
        )
        events = RunEvents(self.parts.bus, scope, self.states, redactor=self.redactor)
        config: RunnableConfig = {
            "configurable": {"thread_id": thread_id},
            "recursion_limit": RECURSION_LIMIT,
            "metadata": {"run_id": scope.run_id, "role": scope.role.value},
        }
        notices = SourceNotices(self.parts.outbound, scope.reply_to, self.redactor) if self._can_answer(scope) else None
        bound = log.bind(thread_id=thread_id, run_id=scope.run_id, role=scope.role.value)
        try:
            return await self._run(scope, fields, config, events, notices, fence=lease.fence)
        except RunSkipped as skipped:
            bound.info("run skipped", reason=str(skipped))
            await events.emit(EventType.COMPLETED, summary=str(skipped), skipped=True)
            return await self._cursor_after_unrun(thread_id, config)
        except RunRefused as refused:
            bound.info("run refused by a budget", reason=str(refused))
            if notices is not None:
                paused = await self.continuations.paused(thread_id) is not None
                await _best_effort(notices, str(refused), bound, continue_button=paused)
            await events.emit(EventType.STEP_LIMIT, budget="refused", notice=str(refused))
            return await self._cursor_after_unrun(thread_id, config)
        except RunEnded as ended:
            bound.warning("run ended early", reason=str(ended))
            if notices is not None:
                await _best_effort(notices, str(ended), bound)
            await events.emit(EventType.ERROR, error=describe(ended))
            return await self._cursor_after_unrun(thread_id, config)
        finally:
            events.abandon()

    def _plan_refusal(self, scope: ThreadScope) -> Callable[[], Awaitable[str | None]] | None:
        gate = self.plan_gate
        if gate is None:
            return None

        async def refusal() -> str | None:
            return await gate.refusal(scope.thread_id, scope.repository)

        return refusal

    def _can_answer(self, scope: ThreadScope) -> bool:
        return self.parts.outbound.configured(scope.reply_to.channel)

    async def _run(
        self,
        scope: ThreadScope,
        fields: dict[str, str],
        config: RunnableConfig,
        events: RunEvents,
        notices: SourceNotices | None,
        *,
        fence: int,
    ) -> int:
        parts = self.parts
        if not parts.models.configured:
            raise RunEnded(NO_MODEL_NOTICE)
        profile = await self.accounts.profile(scope.user_id) if scope.user_id else None
        team = await self.accounts.team()
        team_choice = team.models.get(scope.role.value)
        try:
            resolved = parts.models.resolve(
                thread=ModelChoice.of(fields.get(MODEL), fields.get(EFFORT), where="the thread's model"),
                user=ModelChoice.of(profile.model, profile.effort, where="your profile") if profile else None,
                team=ModelChoice.of(team_choice.model, team_choice.effort, where="the team default")
                if team_choice
                else None,
            )
        except ModelError as error:
            raise RunEnded(f"I can't start: {error}.") from None
        fallback = parts.models.fallback_for(resolved)
        repository_settings = await self.accounts.repository(scope.repository) if scope.repository else None
        limits = Limits.of(team.budgets, repository_settings.budgets if repository_settings else None)
        identity = await self.accounts.identity(scope.user_id) if scope.user_id else None
        spend = SpendCheck(
            self.usage,
            limits,
            run_id=scope.run_id,
            user_id=scope.user_id,
            repository=scope.repository,
            user_name=identity.login if identity else None,
        )
        handle = team.mention_handle or parts.settings.ingress.mention_handle
        queued = await self.inbox.read_after(scope.thread_id, await self._saved_cursor(config))
        pauses = scope.role is Role.CODER
        await self.gate.admit(scope.thread_id, fields, queued, spend, notices, handle=handle, pauses=pauses)
        async with self.gate.place(scope.thread_id, limits, notices):
            return await self._claimed(
                scope,
                fields,
                config,
                events,
                notices,
                fence=fence,
                resolved=resolved,
                fallback=fallback,
                profile=profile,
                limits=limits,
                spend=spend,
                handle=handle,
            )

    async def _claimed(
        self,
        scope: ThreadScope,
        fields: dict[str, str],
        config: RunnableConfig,
        events: RunEvents,
        notices: SourceNotices | None,
        *,
        fence: int,
        resolved: ResolvedModel,
        fallback: ResolvedModel | None,
        profile: UserProfile | None,
        limits: Limits,
        spend: SpendCheck,
        handle: str,
    ) -> int:
        """The run once the budgets let it start: its sandbox, agent and turn."""
        parts = self.parts
        backend = await self._sandbox(scope)
        redactor = self.redactor.with_values(parts.sandboxes.secrets(scope.thread_id))
        events.redactor = redactor
        if notices is not None:
            notices.redactor = redactor
        checkout = await self._checkout(backend, scope.repository) if scope.repository else None
        if parts.hooks.prepare is not None:
            setup = await parts.hooks.prepare(RunSetup(scope, backend, checkout, parts))
            scope, checkout = setup.scope, setup.checkout
        tools = build_tools(
            parts.tool_names,
            ToolContext(
                scope=scope,
                settings=parts.settings,
                bus=parts.bus,
                redis=parts.redis,
                keys=parts.keys,
                outbound=parts.outbound,
                http=parts.http,
                redactor=redactor,
            ),
        )
        status = (
            SourceStatus(parts.outbound, self.metadata, scope.thread_id, scope.reply_to)
            if self._can_answer(scope)
            else None
        )
        usage = UsageRecorder(
            self.usage,
            self.prices,
            UsageScope(
                run_id=scope.run_id,
                thread_id=scope.thread_id,
                role=scope.role.value,
                user_id=scope.user_id,
                repository=scope.repository,
            ),
        )
        inbox = InboxWatch(self.inbox, scope.thread_id)
        inputs = AgentInputs(
            scope=scope,
            model=parts.models.chat_model(resolved),
            fallback=parts.models.chat_model(fallback) if fallback is not None else None,
            backend=backend,
            tools=tools,
            checkpointer=parts.checkpointer,
            inbox=inbox,
            sandbox_failures=parts.sandboxes.failures,
            status=status,
            notifier=notices,
            checkout=checkout,
            limits=replace(self.limits, model_calls=limits.run_model_calls)
            if limits.run_model_calls is not None
            else self.limits,
            spend=spend if limits.spend else None,
            branch_prefix=(profile.branch_prefix if profile and profile.branch_prefix else "drydock/"),
            auto_open_pr=profile.auto_open_pr if profile else True,
            usage=usage,
            redactor=redactor,
            plan_refusal=self._plan_refusal(scope),
        )
        agent = parts.factory(with_inputs(config, inputs))
        await events.emit(
            EventType.STARTED, model=resolved.id, effort=resolved.effort, sandbox_id=backend.id, fence=fence
        )

        async def settle() -> None:
            if checkout is not None and parts.hooks.changes:
                await self._record_changes(scope.thread_id, backend, checkout, redactor)

        # The thread still counts as running only when its last run died mid-turn.
        try:
            await inbox.start()
            cursor, stopped_at = await self._drive(
                agent,
                config,
                events,
                status,
                resume=fields.get(STATE) == ThreadState.RUNNING.value,
                model_calls=inputs.limits.model_calls,
                settle=settle,
            )
        finally:
            await inbox.close()
            await usage.flush()
        if stopped_at is not None:
            bound = log.bind(thread_id=scope.thread_id, run_id=scope.run_id)
            if scope.role is not Role.CODER:
                if notices is not None:
                    await _best_effort(notices, stopped_notice(stopped_at), bound)
            else:
                await self.continuations.pause(scope.thread_id, stopped_at)
                if notices is not None:
                    await _best_effort(notices, paused_notice(stopped_at, handle), bound, continue_button=True)
        if checkout is not None and parts.hooks.snapshots:
            await self._snapshot(scope.thread_id, backend, checkout)
        await self._prune(scope.thread_id)
        return cursor

    async def _prune(self, thread_id: str) -> None:
        """Delete the checkpoints the next run will not read (the dashboard's history comes from
        the events stream): a finished thread would otherwise keep every step's."""
        checkpointer = self.parts.checkpointer
        if not isinstance(checkpointer, DrydockRedisSaver):
            return
        try:
            await checkpointer.aprune([thread_id])
        except (RedisError, OSError) as error:
            # Only storage is lost: the next run's end prunes them.
            log.warning("old checkpoints not pruned", thread_id=thread_id, error=describe(error))

    async def _snapshot(self, thread_id: str, backend: SandboxBackend, checkout: Checkout) -> None:
        if self.parts.snapshots is None:
            return
        relative = checkout.path.removeprefix(backend.handle.workspace.rstrip("/") + "/")
        try:
            await self.parts.snapshots.save(thread_id, backend, repo_dir=relative)
        except Exception as error:
            # The run's work is done and checkpointed; a missing snapshot only matters if this
            # sandbox is lost before the next one, so it must not fail the run.
            log.warning("snapshot after the turn failed", thread_id=thread_id, error=repr(error))

    async def _record_changes(
        self, thread_id: str, backend: SandboxBackend, checkout: Checkout, redactor: Redactor
    ) -> None:
        try:
            result = await backend.run(diff_script(checkout.path, checkout.default_branch), time_limit=60)
            changes = parse(result.output) if result.exit_code == 0 else None
            if changes is None:
                log.warning("reading the checkout's changes failed", thread_id=thread_id, exit_code=result.exit_code)
                return
            where = "the checkout's changes"
            changes = replace(changes, patch=redactor.redact(changes.patch, where=where, thread_id=thread_id))
            await self.changes.save(thread_id, changes)
        except Exception as error:
            # The dashboard's diff view is a convenience: the run's outcome must not depend on it.
            log.warning("recording the checkout's changes failed", thread_id=thread_id, error=describe(error))

    async def _sandbox(self, scope: ThreadScope) -> SandboxBackend:
        sandboxes = self.parts.sandboxes
        try:
            return await sandboxes.ensure_sandbox(scope.thread_id)
        except SandboxError:
            count = await sandboxes.failures.count(scope.thread_id)
            if count >= self.limits.sandbox_failures:
                raise RunEnded(CIRCUIT_OPEN_NOTICE.format(count=count)) from None
            raise

    async def _checkout(self, backend: SandboxBackend, repository: str) -> Checkout:
        """Clone ``repository`` into the sandbox's workspace unless it is there (through the
        credential proxy, by the grant's git rules; a transient failure is retried, and one that
        lasts raises :class:`~drydock.worker.clone_retries.CloneUnavailable` so that the wake is
        redelivered); read its default branch and root AGENTS.md."""
        path = f"{backend.handle.workspace.rstrip('/')}/{repository.rsplit('/', 1)[-1]}"
        url = f"https://{self.parts.settings.github.host}/{repository}.git"
        where = shlex.quote(path)
        script = "\n".join(
            [
                "set -e",
                f"if [ ! -d {where}/.git ]; then git clone --quiet {shlex.quote(url)} {where}; fi",
                f"git -C {where} symbolic-ref --quiet --short refs/remotes/origin/HEAD || true",
            ]
        )
        result = await clone_with_retries(
            lambda: backend.run(script, time_limit=600), repository=repository, thread_id=backend.handle.thread_id
        )
        if result.exit_code != 0:
            tail = result.output.strip()[-600:]
            raise RunEnded(f"I could not clone {repository} into my sandbox:\n```\n{tail}\n```")
        default_branch = (
            result.output.strip().splitlines()[-1].removeprefix("origin/") if result.output.strip() else None
        )
        agents_md = (await backend.adownload_files([f"{path}/AGENTS.md"]))[0]
        instructions = agents_md.content.decode(errors="replace") if agents_md.content is not None else None
        return Checkout(repository=repository, path=path, default_branch=default_branch, instructions=instructions)

    async def _drive(
        self,
        agent: CompiledStateGraph[Any, Any, Any, Any],
        config: RunnableConfig,
        events: RunEvents,
        status: SourceStatus | None,
        *,
        resume: bool,
        model_calls: int,
        settle: Callable[[], Awaitable[None]],
    ) -> tuple[int, Reached | None]:
        """Run the turn; the inbox cursor after it, and the spend limit it stopped at (if it did)."""
        values, stopped_by = await self._stream(agent, None, config, events) if resume else (None, None)
        if values is None:
            # Nothing to resume (or the interrupted turn had in fact finished): a new turn begins.
            turn: dict[str, Any] = {"messages": []}
            if self.parts.hooks.inbox_at_start:
                turn = await self._opening_turn(config)
                if not turn["messages"]:
                    await events.emit(EventType.COMPLETED, summary="", skipped=True)
                    return int(turn["inbox_cursor"]), None
            values, stopped_by = await self._stream(agent, turn, config, events)
        if values is None:
            values = (await agent.aget_state(config)).values
        # Before the end event: a viewer that sees the run end reads its changes.
        await settle()
        if stopped_by is not None:
            return await self._stopped(config, events, status, stopped_by), None
        messages = values.get("messages", [])
        reason = stop_reason(messages)
        reached: Reached | None = None
        if reason is StopReason.STEP_LIMIT:
            await events.emit(EventType.STEP_LIMIT, model_calls=model_calls)
        elif reason is StopReason.BUDGET:
            reached = Reached.from_json(messages[-1].response_metadata[BUDGET_KEY])
            await events.emit(
                EventType.STEP_LIMIT,
                budget=reached.kind.value,
                limit_usd=reached.limit_usd,
                spent_usd=reached.spent_usd,
                unpriced_calls=reached.unpriced_calls,
            )
        elif reason is StopReason.SANDBOX_FAILURES:
            await events.emit(EventType.ERROR, error="the sandbox circuit breaker stopped the run")
        else:
            await events.emit(EventType.COMPLETED, summary=_last_text(messages))
        return int(values.get("inbox_cursor", 0)), reached

    async def _stopped(self, config: RunnableConfig, events: RunEvents, status: SourceStatus | None, by: str) -> int:
        """End a stopped run: its event, the source's indicator, and a cursor past everything
        queued so far. The stream's last state can predate the step that read the inbox, and a
        cursor before the messages the stop answered would start the run again at once."""
        await events.emit(EventType.STOPPED, by=by)
        thread_id = config["configurable"]["thread_id"]
        if status is not None:
            try:
                await status.show(RunStatus.STOPPED, f"Stopped by {by}.")
            except Exception as error:
                log.warning("status indicator failed", thread_id=thread_id, status="stopped", error=repr(error))
        return await self._cursor_after_unrun(thread_id, config)

    async def _stream(
        self,
        agent: CompiledStateGraph[Any, Any, Any, Any],
        turn: dict[str, Any] | None,
        config: RunnableConfig,
        events: RunEvents,
    ) -> tuple[dict[str, Any] | None, str | None]:
        """Run ``turn`` (None: resume) to its end or a stop request; the state after the last step
        (None when no step ran) and who asked to stop. The state comes from the stream, because
        reading it back (``aget_state``) cost tens of milliseconds per run."""
        thread_id = config["configurable"]["thread_id"]
        values: dict[str, Any] | None = None
        ran = False
        clock = asyncio.get_running_loop().time
        next_stop_check = clock()
        try:
            # A step's checkpoint is written while the next step runs: a crash can lose the steps
            # still being written, and the resumed run repeats them, as it repeats a tool call
            # interrupted in sync mode; every step no longer waits for its Redis round trips.
            stream = agent.astream(turn, config, stream_mode=["updates", "values"], durability="async")
            async with contextlib.aclosing(cast(AsyncGenerator[tuple[str, Any], None], stream)) as chunks:
                async for mode, chunk in chunks:
                    if mode == "values":
                        values = chunk
                        continue
                    ran = True
                    await events.from_update(chunk)
                    # A stop request ends the run between steps; the checkpoint keeps the steps done.
                    # Fast steps check it only every STOP_POLL seconds: each check is a round trip.
                    if isinstance(chunk, dict) and chunk.keys() & {"model", "tools"} and clock() >= next_stop_check:
                        next_stop_check = clock() + STOP_POLL
                        stopped_by = await self.stops.take(thread_id)
                        if stopped_by is not None:
                            return values, stopped_by
        except _model_failures() as error:
            detail = _failure_text(error)
            raise RunEnded(f"I stopped because the model failed: {detail}. Reply here to retry.") from None
        # A request that came after the last check is taken too: left pending, it would stop
        # the thread's next run, minutes later.
        stopped_by = await self.stops.take(thread_id) if ran else None
        return (values if ran else None), stopped_by

    async def _opening_turn(self, config: RunnableConfig) -> dict[str, Any]:
        """A new turn's input for a role without inbox middleware: the messages queued after the
        checkpoint's cursor, and the cursor after them (checkpointed with them, as the middleware
        would)."""
        cursor = await self._saved_cursor(config)
        queued = await self.inbox.read_after(config["configurable"]["thread_id"], cursor)
        messages = [
            HumanMessage(content=inbox_message_text(stored.message), id=inbox_message_id(stored.seq))
            for stored in queued
        ]
        return {"messages": messages, "inbox_cursor": queued[-1].seq if queued else cursor}

    async def _saved_cursor(self, config: RunnableConfig) -> int:
        """The inbox cursor of the thread's last checkpoint (0: none yet)."""
        saved = await self.parts.checkpointer.aget_tuple(config)
        return int(saved.checkpoint["channel_values"].get("inbox_cursor", 0)) if saved is not None else 0

    async def _cursor_after_unrun(self, thread_id: str, config: RunnableConfig) -> int:
        """The inbox cursor after a run that ended early: everything queued counts as seen for
        this wake (the notice answered it), but the checkpoint keeps the older cursor, so the
        messages reach the agent once a run works again."""
        cursor = await self._saved_cursor(config)
        queued = await self.inbox.read_after(thread_id, cursor)
        return queued[-1].seq if queued else cursor


class RunEvents:
    """Publishes a run's events on ``drydock.event.{thread}.{type}``.

    The events of each step (model and tool calls) are published without waiting for their
    acknowledgements, which are awaited before the next acknowledged event (a run's start and
    end) or once :data:`PENDING_EVENTS` are outstanding: a step does not wait for a round trip
    per event, and a run does not end before its events are stored.
    """

    def __init__(
        self, bus: Bus, scope: ThreadScope, states: ThreadStates | None = None, *, redactor: Redactor | None = None
    ) -> None:
        self._bus = bus
        self._scope = scope
        self._states = states
        self._pending: list[asyncio.Future[PubAck]] = []
        self.redactor = redactor
        """Redacts secrets from every event's data (the dashboard shows it)."""
        self._arguments: dict[str, str] = {}
        self._since = time.monotonic()

    def _event(self, type: EventType, data: dict[str, Any]) -> RunEvent:
        if self.redactor is not None:
            data = self.redactor.redact_value(data, where=f"event {type.value}", thread_id=self._scope.thread_id)
        return RunEvent(thread_id=self._scope.thread_id, run_id=self._scope.run_id, type=type, data=data)

    async def emit(self, type: EventType, **data: Any) -> None:
        await self.acknowledged()
        event = self._event(type, data)
        await self._bus.emit(event)
        if self._states is not None:
            await self._states.observe(event)

    async def emit_soon(self, type: EventType, **data: Any) -> None:
        """Publish an event that changes no thread state; its acknowledgement is awaited later."""
        self._pending.append(await self._bus.emit_soon(self._event(type, data)))
        if len(self._pending) >= PENDING_EVENTS:
            await self.acknowledged()

    async def acknowledged(self) -> None:
        """Wait until every event published so far is stored."""
        pending, self._pending = self._pending, []
        await self._bus.acknowledged(pending)

    def abandon(self) -> None:
        """Stop waiting for the acknowledgements still outstanding (after a run that failed)."""
        for future in self._pending:
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # retrieved, so that asyncio does not log it as lost
        self._pending.clear()

    async def from_update(self, update: Any) -> None:
        """Events for one graph step's update: a model call, or the tool calls it answered."""
        if not isinstance(update, dict):
            return
        # The time since the previous step: for a model step, how long the model call took.
        now, since = time.monotonic(), self._since
        self._since = now
        for node, change in update.items():
            for message in _messages(change):
                # A stop message stands in for a model call that was not made.
                if node == "model" and isinstance(message, AIMessage) and stop_reason([message]) is None:
                    arguments = [_brief(call["args"]) for call in message.tool_calls]
                    for call, brief in zip(message.tool_calls, arguments, strict=True):
                        if call.get("id"):
                            self._arguments[str(call["id"])] = brief
                    await self.emit_soon(
                        EventType.MODEL_CALL,
                        tool_calls=[call["name"] for call in message.tool_calls],
                        arguments=arguments,
                        text=message.text[:500],
                        **_usage(message),
                        seconds=round(now - since, 3),
                    )
                elif node == "tools" and isinstance(message, ToolMessage):
                    await self.emit_soon(
                        EventType.TOOL_CALL,
                        name=message.name,
                        status=message.status,
                        output=message.text[:500],
                        arguments=self._arguments.pop(message.tool_call_id, None),
                        **_exit_code(message),
                    )


_EXIT_CODE = re.compile(r"\[Command (?:succeeded|failed) with exit code (-?\d+)\]")


def _usage(message: AIMessage) -> dict[str, Any]:
    """A model call's tokens and cost for its event: as recorded at the call
    (:mod:`drydock.usage.recorder`), else the tokens the reply reports, cost unknown."""
    recorded = message.response_metadata.get(USAGE_METADATA_KEY)
    if isinstance(recorded, dict):
        return {key: value for key, value in recorded.items() if key != "model"}
    usage: Mapping[str, Any] = message.usage_metadata or {}
    return {"input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens"), "cost_usd": None}


def _exit_code(message: ToolMessage) -> dict[str, int]:
    """The exit code of deepagents' ``execute``: from the message's artifact, else from the
    status line of its output (which the event's shortened output may have lost)."""
    artifact = message.artifact
    if isinstance(artifact, dict) and isinstance(artifact.get("exit_code"), int):
        return {"exit_code": artifact["exit_code"]}
    found = _EXIT_CODE.findall(message.text)
    return {"exit_code": int(found[-1])} if found else {}


def _messages(change: Any) -> list[BaseMessage]:
    changes = change if isinstance(change, list) else [change]
    found: list[BaseMessage] = []
    for item in changes:
        messages = item.get("messages") if isinstance(item, dict) else None
        if isinstance(messages, list):
            found += [m for m in messages if isinstance(m, BaseMessage)]
    return found


def _brief(arguments: Mapping[str, Any]) -> str:
    """A tool call's arguments for an event: JSON, cut short."""
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return text if len(text) <= 300 else text[:299] + "…"


def _last_text(messages: Sequence[BaseMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, AIMessage) and message.text.strip():
            return message.text[:1000]
    return ""


def _model_failures() -> tuple[type[Exception], ...]:
    # Imported here, not at start-up: the OpenAI SDK is a large part of a worker's import time,
    # and the first model call has imported it by the time one of its errors can arrive.
    import openai

    return (openai.APIError, EmptyReplies)


def _failure_text(error: Exception) -> str:
    import openai

    if isinstance(error, openai.APIStatusError):
        return f"the model endpoint answered {error.status_code} ({error.message})"
    if isinstance(error, openai.APITimeoutError):
        return "the model endpoint timed out"
    if isinstance(error, openai.APIConnectionError):
        return "the model endpoint could not be reached"
    return str(error)


async def _best_effort(notices: SourceNotices, text: str, bound: Any, *, continue_button: bool = False) -> None:
    try:
        await notices.notify(text, continue_button=continue_button)
    except Exception as error:
        bound.warning("notice to the source failed", error=repr(error))
