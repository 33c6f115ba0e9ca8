"""The autofix controller's core: from an event (or a monitor finding) to a recorded decision.

For each signal about an agent pull request (found through its durable PR record), under a
per-thread lock of this process: read the local facts, :func:`~drydock.autofix.policy.screen`;
only if that leaves the question open, ask GitHub and :func:`~drydock.autofix.policy.judge`.
Then apply the decision (dispatch a repair, keep the request pending, post the loop-limit
notice once) and record it as an ``autofix`` event on the thread
(``drydock.event.{thread_id}.autofix``). Events about other pull requests are ignored cheaply:
one Redis lookup. Repeated dispatches are harmless: opening a repair is one atomic script and
the request's message id is derived from the pull request, revision and trigger
(:mod:`drydock.autofix.dispatch`).

A repair ends when the run that claimed it (by reporting its confidence) ends, when the pull
request closes, or when its TTL runs out; the thread's pending requests are then decided again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import structlog
from redis.asyncio import Redis

from drydock.accounts import AccountsStore, RepositorySettings
from drydock.autofix.commands import parse_command
from drydock.autofix.dispatch import dispatch, loop_limit_notice, repair_message
from drydock.autofix.enablement import Enablements
from drydock.autofix.github import WRITE_PERMISSIONS, AutofixGithub, CommitView
from drydock.autofix.metrics import DECISION_SECONDS, DECISIONS, EVENTS
from drydock.autofix.observations import (
    CheckFailure,
    OverrideCommand,
    PullRequestChange,
    ReviewFeedback,
    observe,
)
from drydock.autofix.overrides import AutofixOverrides, Override, OverrideSource
from drydock.autofix.policy import (
    Decision,
    Kind,
    LocalFacts,
    Outcome,
    OverrideState,
    RemoteFacts,
    Rule,
    Signal,
    Source,
    enablement,
    judge,
    screen,
)
from drydock.autofix.repairs import OpenRefused, PullRef, PullState, Repair, Repairs
from drydock.bus import Bus, BusUnavailable, EventType, GithubEvent, RunEvent
from drydock.channels.errors import OutboundFailed
from drydock.config import Settings
from drydock.infra.redis import Keys
from drydock.threads.metadata import ThreadMetadata, ThreadMetadataStore
from drydock.threads.pr_records import PullRequestRecord, PullRequestState, PullRequestStore

log = structlog.get_logger(__name__)

RUN_ID = "autofix"
"""The ``run_id`` of autofix's events: they belong to no agent run."""


class GithubUnavailable(RuntimeError):
    """A decision needs GitHub, and no GitHub App is configured."""


@dataclass(frozen=True)
class Considered:
    """A decision and the pull request it was about."""

    pull: PullRequestRecord
    signal: Signal
    decision: Decision


class ThreadLocks:
    """One lock per thread while someone holds or waits for it: this process decides a thread's
    signals one at a time, so a burst asks GitHub once and the rest are skipped cheaply. Only an
    optimization: the atomic open of :mod:`drydock.autofix.repairs` is what keeps a repair single."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, thread_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(thread_id, (asyncio.Lock(), 0))
        self._locks[thread_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[thread_id]
            if users == 1:
                del self._locks[thread_id]
            else:
                self._locks[thread_id] = (lock, users - 1)


class AutofixController:
    def __init__(
        self, settings: Settings, bus: Bus, redis: Redis, keys: Keys, github: AutofixGithub | None, *, fence: int = 0
    ) -> None:
        self.settings = settings
        self.autofix = settings.autofix
        self.host = settings.github.host
        self.bus = bus
        self.redis = redis
        self.keys = keys
        self.github = github
        self.fence = fence
        self.records = PullRequestStore(redis, keys)
        self.repairs = Repairs(redis, keys)
        self.overrides = AutofixOverrides(redis, keys)
        self.metadata = ThreadMetadataStore(redis, keys)
        self.accounts = AccountsStore(redis, keys, host=self.host)
        self.enablements = Enablements(redis, keys, host=self.host)
        self.locks = ThreadLocks()
        self._agent_email = settings.sandbox.git_user_email.lower()
        self._agent_login = f"{settings.github.app_slug}[bot]".lower() if settings.github.app_slug else None

    @property
    def agent_login(self) -> str | None:
        """The App's bot login (lower case), when the App's slug is configured."""
        return self._agent_login

    async def handle(self, event: GithubEvent) -> list[Considered]:
        """Decide everything ``event`` asks of autofix; returns the decisions made."""
        started = time.perf_counter()
        observation = observe(event, failures=self.autofix.failure_conclusions)
        if observation is None:
            EVENTS.labels("ignored").inc()
            return []
        EVENTS.labels("observed").inc()
        match observation:
            case CheckFailure():
                considered = await self._check_failure(observation)
            case PullRequestChange():
                considered = await self._pull_request(observation)
            case ReviewFeedback():
                considered = await self._review(observation)
            case OverrideCommand():
                considered = await self._command(observation)
        DECISION_SECONDS.observe(time.perf_counter() - started)
        return considered

    async def _check_failure(self, failure: CheckFailure) -> list[Considered]:
        records: list[PullRequestRecord] = []
        if failure.numbers:
            found = await asyncio.gather(
                *(self.records.find(self.host, failure.repository, n) for n in failure.numbers)
            )
            records = [record for record in found if record is not None]
        elif failure.head_branch:
            thread_id = await self.records.thread_for_branch(self.host, failure.repository, failure.head_branch)
            if thread_id is not None:
                records = [
                    record
                    for record in await self.records.of_thread(thread_id)
                    if record.branch == failure.head_branch and record.repository.lower() == failure.repository.lower()
                ]
        signal = Signal(
            Kind.CI, failure.head_sha, Source.WEBHOOK, failure.delivery_id, checks=(failure.name,), url=failure.url
        )
        return [await self.consider(record, signal) for record in records]

    async def _pull_request(self, change: PullRequestChange) -> list[Considered]:
        record = await self.records.find(self.host, change.repository, change.pull.number)
        if record is None:
            return []
        if change.action == "closed":
            await self.closed(record, merged=change.pull.merged)
            return []
        if change.action == "reopened":
            await self.records.set_state(self.host, record.repository, record.number, PullRequestState.OPEN)
            record = replace(record, state=PullRequestState.OPEN)
        if change.action in {"labeled", "unlabeled"} and change.label is not None:
            await self._label(record, change)
        if change.pull.open and change.pull.mergeable is False:
            signal = Signal(Kind.CONFLICT, change.pull.head_sha, Source.WEBHOOK, change.delivery_id)
            return [await self.consider(record, signal)]
        return []

    async def _label(self, record: PullRequestRecord, change: PullRequestChange) -> None:
        states = {self.autofix.label_on: OverrideState.ON, self.autofix.label_off: OverrideState.OFF}
        state = states.get(change.label or "")
        if state is None:
            return
        pull = (self.host, record.repository, record.number)
        if change.action == "labeled":
            await self.overrides.set(*pull, state, by=change.sender, source=OverrideSource.LABEL)
            if state is OverrideState.ON:
                await self.repairs.reset(record.thread_id, pull)
            reason = f"turned {state.value} for this pull request by {change.sender} (label {change.label})"
        else:
            if not await self.overrides.clear(*pull, source=OverrideSource.LABEL):
                return
            reason = (
                f"the label {change.label} was removed by {change.sender}; the owner's and repository's settings decide"
            )
        await self._note(record, "override", reason, delivery_id=change.delivery_id)

    async def _review(self, feedback: ReviewFeedback) -> list[Considered]:
        if feedback.bot:
            return []
        record = await self.records.find(self.host, feedback.repository, feedback.number)
        if record is None:
            return []
        signal = Signal(
            Kind.REVIEW, feedback.head_sha, Source.WEBHOOK, feedback.delivery_id, actor=feedback.actor, url=feedback.url
        )
        return [await self.consider(record, signal)]

    async def _command(self, command: OverrideCommand) -> list[Considered]:
        if command.bot:
            return []
        record = await self.records.find(self.host, command.repository, command.number)
        if record is None:
            return []
        team = await self.accounts.team()
        handle = team.mention_handle or self.settings.ingress.mention_handle
        state = parse_command(command.text, handle)
        if state is None:
            return []
        github = self._require_github()
        pull = (self.host, record.repository, record.number)
        if await github.permission(record.repository, command.actor) not in WRITE_PERMISSIONS:
            await github.comment(
                record.repository,
                record.number,
                f"@{command.actor} only people with write access to {record.repository} can turn autofix "
                f"{state.value} for a pull request.",
            )
            await self._note(
                record, "override_refused", f"{command.actor} has no write access", delivery_id=command.delivery_id
            )
            return []
        await self.overrides.set(*pull, state, by=command.actor, source=OverrideSource.COMMENT)
        if state is OverrideState.ON:
            await self.repairs.reset(record.thread_id, pull)
        await self._note(
            record, "override", f"turned {state.value} for this pull request by {command.actor}",
            delivery_id=command.delivery_id,
        )  # fmt: skip
        with contextlib.suppress(OutboundFailed):
            await github.react(record.repository, command.comment_id, "+1")
        return []

    async def closed(self, record: PullRequestRecord, *, merged: bool) -> None:
        """The pull request was closed or merged: autofix stops acting on it."""
        if await self._forget(record, merged=merged):
            await self.drain(record.thread_id)

    async def _forget(self, record: PullRequestRecord, *, merged: bool) -> bool:
        """Mark the record closed, drop its pending request and end its repair; True if a repair
        ended (the caller then decides the thread's pending requests, outside the thread's lock)."""
        state = PullRequestState.MERGED if merged else PullRequestState.CLOSED
        await self.records.set_state(self.host, record.repository, record.number, state)
        pull = (self.host, record.repository, record.number)
        await self.repairs.drop_pending(record.thread_id, pull)
        active = await self.repairs.active(record.thread_id)
        ended = active is not None and active.pull == pull and await self.repairs.finish(record.thread_id, active.id)
        await self._note(record, "closed", f"the pull request was {state.value}; autofix stops acting on it")
        return bool(ended)

    async def run_ended(self, event: RunEvent) -> None:
        """A run of a thread ended: the repair it claimed (by reporting a confidence) ends with it,
        and the thread's pending requests are decided again."""
        repair = await self.repairs.active(event.thread_id)
        if repair is None or repair.claimed_at is None or event.at < repair.claimed_at:
            return
        ended = await self.repairs.finish(event.thread_id, repair.id)
        if ended is None:
            return
        if ended.confidence is None:
            verdict = "no confidence was reported"
        elif ended.push_allowed:
            verdict = f"confidence {ended.confidence:g} (threshold {ended.threshold:g}): its push was let through"
        else:
            verdict = f"confidence {ended.confidence:g} (threshold {ended.threshold:g}): no push, a diagnosis instead"
        record = await self.records.find(ended.host, ended.repository, ended.number)
        if record is not None:
            await self._note(record, "repair_ended", f"repair {ended.attempt} ended ({event.type.value}): {verdict}")
        await self.drain(event.thread_id)

    async def drain(self, thread_id: str) -> None:
        """Decide the thread's pending requests until one is dispatched or coalesced again."""
        while (taken := await self.repairs.take_pending(thread_id)) is not None:
            (host, repository, number), signal = taken
            record = await self.records.find(host, repository, number)
            if record is None:
                continue
            considered = await self.consider(record, signal)
            if considered.decision.outcome in {Outcome.DISPATCH, Outcome.COALESCE}:
                return

    async def consider(self, record: PullRequestRecord, signal: Signal) -> Considered:
        """Decide ``signal`` about the agent pull request ``record``, apply and record the decision."""
        async with self.locks.hold(record.thread_id):
            thread, local = await self._local(record, signal)
            decision = screen(signal, local)
            base = ""
            if decision is None:
                remote, base = await self._remote(record, signal)
                decision = judge(signal, remote)
            decision, published = await self._apply(record, signal, decision, thread, base=base)
        # Recorded after the lock: the decision is carried out, and the thread's next signal need
        # not wait for this acknowledgement.
        if published:
            await self._record(record, signal, decision)
        return Considered(record, signal, decision)

    async def _local(self, record: PullRequestRecord, signal: Signal) -> tuple[ThreadMetadata | None, LocalFacts]:
        """The thread's metadata and the local facts, in one round trip (two when the owner's
        profile decides)."""
        pull: PullRef = (self.host, record.repository, record.number)
        async with self.redis.pipeline(transaction=False) as pipe:
            self.metadata.queue_find(pipe, record.thread_id)
            self.accounts.queue_repository(pipe, record.repository)
            self.overrides.queue_get(pipe, *pull)
            self.repairs.queue_state(pipe, record.thread_id, pull, signal.head_sha, signal.kind)
            thread_reply, settings_reply, override_reply, state_reply = await pipe.execute()
        thread = ThreadMetadata.from_reply(record.thread_id, thread_reply)
        settings = RepositorySettings.from_json(settings_reply)
        override = Override.from_hash(override_reply)
        state = PullState.of(state_reply)
        owner = thread.owner if thread is not None else None
        user = bool(owner) and override is None and (await self.accounts.profile(owner or "")).autofix
        enabled = enablement(
            user=user,
            repository=settings is not None and settings.autofix,
            override=override.state if override is not None else None,
        )
        local = LocalFacts(
            open=record.state is PullRequestState.OPEN,
            enablement=enabled,
            processed=state.processed,
            repair_active=state.repair_active,
            repairs=state.repairs,
            max_repairs=self.autofix.max_repairs,
        )
        return thread, local

    async def _remote(self, record: PullRequestRecord, signal: Signal) -> tuple[RemoteFacts, str]:
        github = self._require_github()
        pull = await github.pull(record.repository, record.number)
        if not pull.open:
            # Under the thread's lock: a repair ended here is drained by the next run end or scan.
            await self._forget(record, merged=pull.merged)
            return RemoteFacts(False, pull.head_sha, False, frozenset(), frozenset(), pull.mergeable), pull.base_ref
        conclusions = self.autofix.failure_conclusions

        async def failures(ref: str) -> frozenset[str]:
            if signal.kind is not Kind.CI:
                return frozenset()
            return await github.failing_checks(record.repository, ref, conclusions)

        async def can_write() -> bool | None:
            if signal.kind is not Kind.REVIEW or signal.actor is None:
                return None
            return await github.permission(record.repository, signal.actor) in WRITE_PERMISSIONS

        # The base's checks are read along with the head's, not after: a CI signal nearly always
        # has a failing head, and one round trip fewer is most of a dispatch's wait.
        commit, failing, base_failing, writer = await asyncio.gather(
            github.commit(record.repository, pull.head_sha),
            failures(pull.head_sha),
            failures(pull.base_ref),
            can_write(),
        )
        facts = RemoteFacts(
            open=True,
            head_sha=pull.head_sha,
            head_by_agent=self._by_agent(commit),
            head_failures=failing,
            base_failures=base_failing,
            mergeable=pull.mergeable,
            actor_can_write=writer,
        )
        return facts, pull.base_ref

    def _by_agent(self, commit: CommitView) -> bool:
        if commit.committer_email.lower() == self._agent_email:
            return True
        return self._agent_login is not None and (commit.committer_login or "").lower() == self._agent_login

    def _require_github(self) -> AutofixGithub:
        if self.github is None:
            raise GithubUnavailable("autofix needs the GitHub App: set DRYDOCK_GITHUB_APP_ID and _PRIVATE_KEY")
        return self.github

    async def _apply(
        self, record: PullRequestRecord, signal: Signal, decision: Decision, thread: ThreadMetadata | None, *, base: str
    ) -> tuple[Decision, bool]:
        """Carry the decision out; returns it (a concurrent writer can turn a dispatch into another
        outcome) and whether it is worth an event on the thread."""
        pull: PullRef = (self.host, record.repository, record.number)
        if decision.outcome is Outcome.DISPATCH:
            return await self._dispatch(record, signal, decision, thread, base=base)
        if decision.outcome is Outcome.COALESCE:
            new = await self.repairs.hold(record.thread_id, pull, signal)
            return decision, new or signal.source is not Source.MONITOR
        if decision.outcome is Outcome.STOP:
            noticed = await self._loop_limit(record, signal, decision)
            return decision, noticed or signal.source is not Source.MONITOR
        return decision, signal.source is not Source.MONITOR

    async def _dispatch(
        self, record: PullRequestRecord, signal: Signal, decision: Decision, thread: ThreadMetadata | None, *, base: str
    ) -> tuple[Decision, bool]:
        repair = Repair(
            id=uuid.uuid4().hex[:16],
            thread_id=record.thread_id,
            host=self.host,
            repository=record.repository,
            number=record.number,
            head_sha=signal.head_sha,
            kind=signal.kind,
            threshold=self.autofix.confidence_threshold,
            dispatched_at=datetime.now(UTC),
            checks=decision.checks,
        )
        try:
            attempt = await self.repairs.open(
                repair, max_repairs=self.autofix.max_repairs, ttl=self.autofix.repair_timeout
            )
        except OpenRefused as refused:
            return await self._apply(record, signal, _refusal(refused.reason), thread, base=base)
        repair = replace(repair, attempt=attempt)
        message = repair_message(repair, signal, thread, branch=record.branch, base=base or "the base branch")
        try:
            await dispatch(self.bus, self.metadata, message)
        except BusUnavailable:
            await self.repairs.abandon(repair)
            raise
        reason = f"{decision.reason}; repair {attempt} of at most {self.autofix.max_repairs}"
        return Decision(decision.outcome, decision.rule, reason, decision.checks), True

    async def _loop_limit(self, record: PullRequestRecord, signal: Signal, decision: Decision) -> bool:
        """Tell the pull request once that autofix stopped; True if this call told it."""
        pull: PullRef = (self.host, record.repository, record.number)
        if self.github is None or not await self.repairs.claim_limit_notice(record.thread_id, pull):
            return False
        team = await self.accounts.team()
        handle = team.mention_handle or self.settings.ingress.mention_handle
        try:
            await self.github.comment(
                record.repository, record.number, loop_limit_notice(self.autofix.max_repairs, handle)
            )
        except OutboundFailed:
            await self.repairs.release_limit_notice(record.thread_id, pull)
            raise
        with contextlib.suppress(OutboundFailed):
            await self.github.neutral_check(
                record.repository,
                signal.head_sha,
                title="Autofix stopped: loop limit reached",
                summary=decision.reason + ". A person needs to look at this pull request.",
            )
        return True

    async def _record(self, record: PullRequestRecord, signal: Signal, decision: Decision) -> None:
        DECISIONS.labels(decision.outcome.value, decision.rule.value).inc()
        data: dict[str, Any] = {
            "outcome": decision.outcome.value,
            "rule": decision.rule.value,
            "reason": decision.reason,
            "pull_request": f"{record.repository}#{record.number}",
            "head_sha": signal.head_sha,
            "trigger": signal.kind.value,
            "source": signal.source.value,
            "delivery_id": signal.delivery_id,
            "fence": self.fence,
        }
        if decision.checks:
            data["checks"] = list(decision.checks)
        if decision.outcome is not Outcome.SKIP:
            # A skip's event is its record; a log line per skip would only repeat it, at volume.
            log.info("autofix decision", thread_id=record.thread_id, **data)
        await self.bus.emit(RunEvent(thread_id=record.thread_id, run_id=RUN_ID, type=EventType.AUTOFIX, data=data))

    async def _note(self, record: PullRequestRecord, what: str, reason: str, *, delivery_id: str = "") -> None:
        """Record something autofix did besides deciding (an override, a repair's end)."""
        data = {
            "outcome": what,
            "reason": reason,
            "pull_request": f"{record.repository}#{record.number}",
            "delivery_id": delivery_id,
            "fence": self.fence,
        }
        log.info("autofix", thread_id=record.thread_id, **data)
        await self.bus.emit(RunEvent(thread_id=record.thread_id, run_id=RUN_ID, type=EventType.AUTOFIX, data=data))


def _refusal(reason: str) -> Decision:
    """What another writer's state change (seen by the atomic open) turns a dispatch into."""
    if reason == "repair_active":
        return Decision(
            Outcome.COALESCE,
            Rule.REPAIR_ACTIVE,
            "a repair run of this thread became active; decided again when it ends",
        )
    if reason == "already_processed":
        return Decision(
            Outcome.SKIP, Rule.ALREADY_PROCESSED, "this head revision already got a repair for this trigger"
        )
    return Decision(Outcome.STOP, Rule.LOOP_LIMIT, "the pull request reached the most repair runs allowed")
