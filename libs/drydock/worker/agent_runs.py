"""One thread run of an agent role, between taking the lease and releasing it (steps 2 and 3 of
the run loop in DESIGN.md section 3).

Per run: read the thread's metadata, resolve the model (thread, user, team, installation),
ensure the sandbox and the repository's checkout, build the role's tools, take the role's graph
from its factory (shared by the process's runs, :mod:`drydock.graphs.shared`) with what this run
brings to it, and run it against the thread's checkpoint. A run interrupted by
a crash is resumed from its last checkpoint (the next step of the graph is still pending);
otherwise a new turn starts, and the inbox middleware injects what arrived since the last one.
Roles differ only through their :class:`~drydock.worker.role_spec.RoleSpec`: its tools and
graph, a preparation after the checkout (the reviewer's pull request head, the analyzer's
evidence), turns that start with the inbox's messages (for graphs without the inbox middleware),
whether the checkout is snapshotted and its changes recorded, and whether a spend limit pauses
the thread. The checkout itself is :mod:`drydock.worker.checkouts`; the events,
:mod:`drydock.worker.run_events`.

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
thread (where its role says so) and tells the source how to continue.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import httpx
import structlog
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import EmptyInputError
from langgraph.graph.state import CompiledStateGraph
from redis.asyncio import Redis
from redis.exceptions import RedisError

from drydock.accounts import UserProfile
from drydock.accounts.store import AccountsStore
from drydock.budgets import ActiveRuns, Limits, Reached, SpendCheck
from drydock.bus import Bus, EventType
from drydock.channels.outbound import Outbound
from drydock.channels.run_status import RunStatus
from drydock.checkpoints import DrydockRedisSaver
from drydock.config import Settings
from drydock.errors import describe
from drydock.graphs.entrypoints import run_context, with_inputs
from drydock.graphs.inputs import AgentInputs, GraphFactory
from drydock.graphs.shared import RunContext
from drydock.infra.redis import Keys
from drydock.middleware import EmptyReplies, RunLimits, StopReason, stop_reason
from drydock.middleware.inbox_injection import inbox_message_id, inbox_message_text
from drydock.middleware.model_call_limit import fresh_count
from drydock.middleware.outcome import BUDGET_KEY
from drydock.model_catalog import PriceTable
from drydock.models import ModelChoice, ModelError, Models, ResolvedModel
from drydock.redaction import Redactor
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.errors import SandboxError
from drydock.sandbox.lifecycle import SandboxManager
from drydock.sandbox.snapshots import SnapshotStore
from drydock.threads import Inbox, Lease, StoredMessage
from drydock.threads.approvals import PlanGate
from drydock.threads.changes import ThreadChanges
from drydock.threads.checkout import Checkout
from drydock.threads.continuation import Continuations
from drydock.threads.inbox import InboxWatch
from drydock.threads.metadata import ThreadMetadata, ThreadMetadataStore
from drydock.threads.scope import ThreadScope
from drydock.threads.states import ThreadState, ThreadStates
from drydock.threads.stops import StopRequests
from drydock.tools import build_tools
from drydock.tools.context import ToolContext
from drydock.usage import UsageLedger, UsageRecorder, UsageScope
from drydock.worker import metrics
from drydock.worker.budget_gate import BudgetGate, RunRefused, paused_notice, stopped_notice
from drydock.worker.checkouts import Checkouts
from drydock.worker.role_spec import RoleSpec, RunEnded, RunSetup, RunSkipped
from drydock.worker.run_events import RunEvents
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
STOP_POLL = 0.25
"""Seconds between two checks for a stop request while a run's steps go by."""
EARLY_SANDBOX_WAIT = 1.0
"""Seconds a run may wait for a place among its team's runs and still take the sandbox checked
before it waited."""


@dataclass(frozen=True)
class RunParts:
    """What every run of a worker process shares."""

    spec: RoleSpec
    factory: GraphFactory
    settings: Settings
    bus: Bus
    redis: Redis
    keys: Keys
    sandboxes: SandboxManager
    checkpointer: BaseCheckpointSaver[Any]
    outbound: Outbound
    models: Models
    http: httpx.AsyncClient
    snapshots: SnapshotStore | None = None
    """Saves the checkout at the end of each turn, so a recreated sandbox gets unpushed work back."""


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
        self.checkouts = Checkouts(
            host=parts.settings.github.host, changes=ThreadChanges(parts.redis, parts.keys), snapshots=parts.snapshots
        )

    async def __call__(self, thread_id: str, lease: Lease) -> int:
        thread = await self.metadata.get(thread_id)
        scope = ThreadScope(
            thread_id=thread_id,
            run_id=uuid.uuid4().hex,
            role=self.parts.spec.role,
            repository=thread.repository,
            reply_to=thread.require_reply_to(),
            user_id=thread.owner,
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
            with metrics.RUNS_IN_PROGRESS.labels(scope.role.value).track_inprogress():
                return await self._run(scope, thread, config, events, notices, fence=lease.fence)
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
            if not events.ended:
                metrics.RUNS.labels(scope.role.value, metrics.INTERRUPTED).inc()

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
        thread: ThreadMetadata,
        config: RunnableConfig,
        events: RunEvents,
        notices: SourceNotices | None,
        *,
        fence: int,
    ) -> int:
        parts = self.parts
        if not parts.models.configured:
            raise RunEnded(NO_MODEL_NOTICE)
        # A sandbox this process holds is checked (nothing is created) and the checkpoint loaded
        # while the run's reads and budgets go by; a refused run drops both.
        async with (
            self._preloaded(config),
            self._early_sandbox(scope, thread) as early,
            self._watched(scope.thread_id) as inbox,
        ):
            # Independent reads, in one wait: the run's accounts, and the inbox after its cursor
            # (through the run's watch, which answers the first model call's read from it).
            accounts, queued = await asyncio.gather(
                self.accounts.for_run(scope.user_id, scope.repository), self._queued(inbox, config)
            )
            profile, team = accounts.profile, accounts.team
            team_choice = team.models.get(scope.role.value)
            try:
                resolved = parts.models.resolve(
                    thread=ModelChoice.of(thread.model, thread.effort, where="the thread's model"),
                    user=ModelChoice.of(profile.model, profile.effort, where="your profile") if profile else None,
                    team=ModelChoice.of(team_choice.model, team_choice.effort, where="the team default")
                    if team_choice
                    else None,
                )
            except ModelError as error:
                raise RunEnded(f"I can't start: {error}.") from None
            fallback = parts.models.fallback_for(resolved)
            limits = Limits.of(team.budgets, accounts.repository.budgets if accounts.repository else None)
            identity = accounts.identity
            spend = SpendCheck(
                self.usage,
                limits,
                run_id=scope.run_id,
                user_id=scope.user_id,
                repository=scope.repository,
                user_name=identity.login if identity else None,
            )
            handle = team.mention_handle or parts.settings.ingress.mention_handle
            await self.gate.admit(
                scope.thread_id, thread, queued, spend, notices, handle=handle, pauses=parts.spec.pauses
            )
            clock = asyncio.get_running_loop().time
            waiting = clock()
            async with self.gate.place(scope.thread_id, limits, notices):
                if early is not None and clock() - waiting > EARLY_SANDBOX_WAIT:
                    # The run waited for a place: what was checked before may no longer hold.
                    await _dropped(early)
                    early = None
                return await self._claimed(
                    scope,
                    thread,
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
                    early=early,
                    inbox=inbox,
                )

    async def _claimed(
        self,
        scope: ThreadScope,
        thread: ThreadMetadata,
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
        early: asyncio.Future[tuple[SandboxBackend, Checkout | None]] | None,
        inbox: InboxWatch,
    ) -> int:
        """The run once the budgets let it start: its sandbox (``early``: being checked already),
        agent and turn."""
        parts = self.parts
        backend, checkout = await (early if early is not None else self._sandbox_and_checkout(scope))
        redactor = self.redactor.with_values(parts.sandboxes.secrets(scope.thread_id))
        events.redactor = redactor
        if notices is not None:
            notices.redactor = redactor
        if parts.spec.prepare is not None:
            prepared = await parts.spec.prepare(
                RunSetup(
                    scope=scope,
                    backend=backend,
                    checkout=checkout,
                    bus=parts.bus,
                    redis=parts.redis,
                    keys=parts.keys,
                    github=parts.outbound.github,
                    host=parts.settings.github.host,
                    review=parts.settings.review,
                )
            )
            scope, checkout = prepared.scope, prepared.checkout
        tools = build_tools(
            parts.spec.tools,
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
        run_config = with_inputs(config, inputs)
        agent = parts.factory(run_config)
        context = run_context(parts.spec.graph, run_config)
        await events.begin(model=resolved.id, effort=resolved.effort, sandbox_id=backend.id, fence=fence)

        async def settle() -> None:
            if checkout is not None and parts.spec.changes:
                await self.checkouts.record_changes(scope.thread_id, backend, checkout, redactor)

        # The thread still counts as running only when its last run died mid-turn.
        try:
            cursor, stopped_at = await self._drive(
                agent,
                context,
                config,
                events,
                status,
                resume=thread.state is ThreadState.RUNNING,
                model_calls=inputs.limits.model_calls,
                settle=settle,
                inbox=inbox,
            )
        finally:
            await usage.flush()
        if stopped_at is not None:
            bound = log.bind(thread_id=scope.thread_id, run_id=scope.run_id)
            if not parts.spec.pauses:
                if notices is not None:
                    await _best_effort(notices, stopped_notice(stopped_at), bound)
            else:
                await self.continuations.pause(scope.thread_id, stopped_at)
                if notices is not None:
                    await _best_effort(notices, paused_notice(stopped_at, handle), bound, continue_button=True)
        if checkout is not None and parts.spec.snapshots:
            await self.checkouts.snapshot(scope.thread_id, backend, checkout)
        await self._prune(config, agent.channels)
        return cursor

    async def _prune(self, config: RunnableConfig, channels: Mapping[str, object]) -> None:
        """Leave the thread one checkpoint holding its whole state (the delta channels, such as
        the messages, stored there whole), so the next run loads it without walking back the
        history, and a finished thread keeps no step's checkpoint (the dashboard's history comes
        from the events stream). Runs under the thread's lease, which this run still holds."""
        checkpointer = self.parts.checkpointer
        if not isinstance(checkpointer, DrydockRedisSaver):
            return
        try:
            await checkpointer.acompact(config, channels)
        except (RedisError, OSError) as error:
            # The thread stays valid (snapshots are written before anything is deleted); only
            # the next run's load is slower and storage is kept until its end compacts.
            log.warning(
                "checkpoints not compacted", thread_id=config["configurable"]["thread_id"], error=describe(error)
            )

    def _preloaded(self, config: RunnableConfig) -> contextlib.AbstractAsyncContextManager[None]:
        checkpointer = self.parts.checkpointer
        if isinstance(checkpointer, DrydockRedisSaver):
            return checkpointer.preloaded(config)
        return contextlib.nullcontext()

    @contextlib.asynccontextmanager
    async def _watched(self, thread_id: str) -> AsyncIterator[InboxWatch]:
        """The run's watch of its inbox, started by :meth:`_queued`."""
        watch = InboxWatch(self.inbox, thread_id)
        try:
            yield watch
        finally:
            await watch.close()

    async def _queued(self, inbox: InboxWatch, config: RunnableConfig) -> list[StoredMessage]:
        cursor, _ = await asyncio.gather(self._saved_cursor(config), inbox.start())
        return await inbox.read_after(inbox.thread_id, cursor)

    @contextlib.asynccontextmanager
    async def _early_sandbox(
        self, scope: ThreadScope, thread: ThreadMetadata
    ) -> AsyncIterator[asyncio.Future[tuple[SandboxBackend, Checkout | None]] | None]:
        """The sandbox and checkout of :meth:`_sandbox_and_checkout`, started now if this process
        holds the thread's sandbox (None otherwise: a sandbox is created only once the run may
        start), from the metadata the run has just read; given up at the block's end unless
        taken."""
        if self.parts.sandboxes.cached(scope.thread_id) is None:
            yield None
            return
        early = asyncio.ensure_future(self._sandbox_and_checkout(scope, read=thread))
        try:
            yield early
        finally:
            await _dropped(early)

    async def _sandbox_and_checkout(
        self, scope: ThreadScope, *, read: ThreadMetadata | None = None
    ) -> tuple[SandboxBackend, Checkout | None]:
        """The thread's sandbox and its checkout of the repository. A checkout the sandbox this
        process last held already has is looked for while that sandbox is checked, and taken
        only if the sandbox is still the thread's; otherwise it is cloned or checked once the
        sandbox answers."""
        repository = scope.repository
        last = self.parts.sandboxes.cached(scope.thread_id)
        found = asyncio.ensure_future(self.checkouts.existing(last, repository)) if last and repository else None
        try:
            backend = await self._sandbox(scope, read)
        except BaseException:
            if found is not None:
                await _dropped(found)
            raise
        if repository is None:
            return backend, None
        if found is not None:
            if backend is not last:
                await _dropped(found)
            elif isinstance(looked := (await asyncio.gather(found, return_exceptions=True))[0], Checkout):
                return backend, looked
        return backend, await self.checkouts.clone(backend, repository)

    async def _sandbox(self, scope: ThreadScope, read: ThreadMetadata | None) -> SandboxBackend:
        sandboxes = self.parts.sandboxes
        try:
            return await sandboxes.ensure_sandbox(scope.thread_id, read=read)
        except SandboxError:
            count = await sandboxes.failures.count(scope.thread_id)
            if count >= self.limits.sandbox_failures:
                raise RunEnded(CIRCUIT_OPEN_NOTICE.format(count=count)) from None
            raise

    async def _drive(
        self,
        agent: CompiledStateGraph[Any, Any, Any, Any],
        context: RunContext | None,
        config: RunnableConfig,
        events: RunEvents,
        status: SourceStatus | None,
        *,
        resume: bool,
        model_calls: int,
        settle: Callable[[], Awaitable[None]],
        inbox: InboxWatch,
    ) -> tuple[int, Reached | None]:
        """Run the turn; the inbox cursor after it, and the spend limit it stopped at (if it did)."""
        values, stopped_by = await self._resumed(agent, context, config, events) if resume else (None, None)
        if values is None:
            # Nothing to resume (or the interrupted turn had in fact finished): a new turn begins.
            turn: dict[str, Any] = {"messages": []}
            if self.parts.spec.inbox_at_start:
                turn = await self._opening_turn(config, inbox)
                if not turn["messages"]:
                    await events.emit(EventType.COMPLETED, summary="", skipped=True)
                    return int(turn["inbox_cursor"]), None
            values, stopped_by = await self._stream(agent, context, turn | fresh_count(), config, events)
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

    async def _resumed(
        self,
        agent: CompiledStateGraph[Any, Any, Any, Any],
        context: RunContext | None,
        config: RunnableConfig,
        events: RunEvents,
    ) -> tuple[dict[str, Any] | None, str | None]:
        """Resume the interrupted turn, as :meth:`_stream`; nothing to resume when the run that
        left the thread running died before the graph wrote its first checkpoint."""
        try:
            return await self._stream(agent, context, None, config, events)
        except EmptyInputError:
            log.info(
                "nothing to resume: the last run ended before its first step",
                thread_id=config["configurable"]["thread_id"],
            )
            return None, None

    async def _stream(
        self,
        agent: CompiledStateGraph[Any, Any, Any, Any],
        context: RunContext | None,
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
            stream = agent.astream(turn, config, context=context, stream_mode=["updates", "values"], durability="async")
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

    async def _opening_turn(self, config: RunnableConfig, inbox: InboxWatch) -> dict[str, Any]:
        """A new turn's input for a role without inbox middleware: the messages queued after the
        checkpoint's cursor, and the cursor after them (checkpointed with them, as the middleware
        would). Read through the run's watch, which has them from the run's start."""
        cursor = await self._saved_cursor(config)
        queued = await inbox.read_after(inbox.thread_id, cursor)
        messages = [
            HumanMessage(content=inbox_message_text(stored.message), id=inbox_message_id(stored.seq))
            for stored in queued
        ]
        return {"messages": messages, "inbox_cursor": queued[-1].seq if queued else cursor}

    async def _saved_cursor(self, config: RunnableConfig) -> int:
        """The inbox cursor of the thread's last checkpoint (0: none yet), read without the rest
        of the checkpoint (whose messages can be the whole conversation)."""
        checkpointer = self.parts.checkpointer
        if isinstance(checkpointer, DrydockRedisSaver):
            return int(await checkpointer.aget_channel_value(config, "inbox_cursor", 0))
        saved = await checkpointer.aget_tuple(config)
        return int(saved.checkpoint["channel_values"].get("inbox_cursor", 0)) if saved is not None else 0

    async def _cursor_after_unrun(self, thread_id: str, config: RunnableConfig) -> int:
        """The inbox cursor after a run that ended early: everything queued counts as seen for
        this wake (the notice answered it), but the checkpoint keeps the older cursor, so the
        messages reach the agent once a run works again."""
        cursor = await self._saved_cursor(config)
        queued = await self.inbox.read_after(thread_id, cursor)
        return queued[-1].seq if queued else cursor


async def _dropped(future: asyncio.Future[Any]) -> None:
    """Cancel ``future`` unless it is done, and wait for it; nothing it raised is raised here."""
    future.cancel()
    await asyncio.gather(future, return_exceptions=True)


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
