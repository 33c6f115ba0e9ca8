"""Every way a run of :class:`~drydock.worker.agent_runs.AgentRuns` ends, with the thread's state,
its run events, what the source conversation is told and the inbox cursor returned.

The run loop runs whole here: real NATS and Valkey, a real local sandbox, the coder's real
graph against the scripted model server, and the Slack double as the source conversation.

Endings: the turn finishes; a stop request; the step limit; a spend limit (which pauses a
coder thread, and only stops a role that does not pause); the plan-approval wait (file writes
refused, the turn ends waiting for the owner); the model failing; the budget gate refusing a
paused thread; the preparation skipping (``RunSkipped``) or ending (``RunEnded``) the run; no
model configured; a model choice the catalog rejects; a clone that fails for good; a clone that
stays unavailable (raised, so the wake is redelivered); the sandbox failing below and at the
circuit breaker's threshold, or lost mid-run (the breaker ends the run); the model answering
empty after every nudge; the lease lost mid-run (raised, the thread left running; the next
holder resumes the turn); a role without inbox middleware woken with nothing queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from drydock.accounts import AccountsStore, RepositorySettings, TeamBudgets, TeamDefaults
from drydock.budgets import LimitKind, Reached
from drydock.bus import Author, Bus, Channel, EventType, InboxMessage, ReplyAddress, RunEvent, subjects
from drydock.bus.streams import EVENTS_STREAM
from drydock.channels.outbound import Outbound
from drydock.checkpoints import open_checkpointer
from drydock.config import Settings, load_settings
from drydock.embedded import EmbeddedUrls
from drydock.graphs.manifest import Manifest
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.models import Models
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.credentials import NoProxy
from drydock.sandbox.errors import SandboxError
from drydock.sandbox.lifecycle import SandboxManager
from drydock.sandbox.providers.local import LocalProvider
from drydock.sandbox.records import SandboxStore
from drydock.telemetry import REGISTRY
from drydock.threads import Inbox, LeaseLost, Leases
from drydock.threads.approvals import PLAN_REQUIRED_TEXT
from drydock.threads.checkout import Checkout
from drydock.threads.continuation import Continuations
from drydock.threads.fields import MODEL, OWNER, REPLY_TO, REPOSITORY, SANDBOX_ID
from drydock.threads.metadata import ThreadMetadata, ThreadMetadataStore
from drydock.threads.states import ThreadState, ThreadStates
from drydock.threads.stops import StopRequests
from drydock.worker.agent_runs import CIRCUIT_OPEN_NOTICE, NO_MODEL_NOTICE, AgentRuns, RunParts
from drydock.worker.budget_gate import paused_notice
from drydock.worker.clone_retries import CloneUnavailable
from drydock.worker.role_spec import Prepared, RoleSpec, RunSetup, RunSkipped
from drydock.worker.roles import coder, reviewer
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.fakes.slack import FakeSlack, PostedMessage
from tests.sandbox.conftest import bwrap, sandbox_root  # noqa: F401 (fixtures)

MODEL_ID = "gpt-5.1"
CHANNEL = "C0RUNS"
OWNER_ID = "user-ada"
HANDLE = "@drydock"


@dataclass
class Rig:
    """An :class:`AgentRuns` of one role, and what a test reads after a run."""

    runs: AgentRuns
    settings: Settings
    bus: Bus
    redis: Redis
    keys: Keys
    slack: FakeSlack
    model: ScriptedModelServer
    sandboxes: SandboxManager

    @property
    def metadata(self) -> ThreadMetadataStore:
        return ThreadMetadataStore(self.redis, self.keys)

    @property
    def accounts(self) -> AccountsStore:
        return AccountsStore(self.redis, self.keys, host=self.settings.github.host)

    async def thread(self, *, fields: Mapping[str, str] | None = None, message: bool = True) -> Thread:
        """A thread of the rig's role answering in a Slack thread, with one message queued."""
        thread_id = str(uuid.uuid4())
        ts = self.slack.state.add_message(CHANNEL, "@drydock please", user="U0ADA")
        reply_to = ReplyAddress(channel=Channel.SLACK, address={"team": "T0", "channel": CHANNEL, "thread_ts": ts})
        own = {REPLY_TO: reply_to.model_dump_json(), OWNER: OWNER_ID, **(fields or {})}
        await self.metadata.create(thread_id, kind=self.runs.parts.spec.role, fields=own)
        seq = 0
        if message:
            appended = await Inbox(self.bus).append(
                InboxMessage(
                    delivery_id=uuid.uuid4().hex,
                    thread_id=thread_id,
                    channel=Channel.SLACK,
                    author=Author(channel=Channel.SLACK, external_id="U0ADA", name="ada"),
                    text="@drydock please",
                    reply_to=reply_to,
                )
            )
            seq = appended.seq
        return Thread(thread_id, ts, seq)

    async def run(self, thread: Thread) -> int:
        leases = Leases(self.redis, self.keys, ttl=timedelta(seconds=30))
        lease = await leases.acquire(thread.id, "test")
        assert lease is not None
        try:
            return await self.runs(thread.id, lease)
        finally:
            await leases.release(lease)

    async def events(self, thread: Thread) -> list[RunEvent]:
        wanted = subjects.events_of(thread.id)
        stored = (await self.bus.js.stream_info(EVENTS_STREAM, subjects_filter=wanted)).state.subjects or {}
        subscription = await self.bus.js.subscribe(wanted, stream=EVENTS_STREAM, ordered_consumer=True)
        try:
            return [
                RunEvent.model_validate_json((await subscription.next_msg(timeout=5)).data)
                for _ in range(sum(stored.values()))
            ]
        finally:
            await subscription.unsubscribe()

    async def types(self, thread: Thread) -> list[EventType]:
        return [event.type for event in await self.events(thread)]

    async def last(self, thread: Thread) -> dict[str, Any]:
        return (await self.events(thread))[-1].data

    async def state(self, thread: Thread) -> ThreadState | None:
        return await ThreadStates(self.redis, self.keys).get(thread.id)

    def told(self, thread: Thread) -> list[PostedMessage]:
        """What the agent posted in the thread's Slack conversation."""
        return [m for m in self.slack.state.replies_in(CHANNEL, thread.ts) if m.user != "U0ADA"]

    def texts(self, thread: Thread) -> list[str]:
        return [m.text for m in self.told(thread)]


@dataclass(frozen=True)
class Thread:
    id: str
    ts: str
    seq: int
    """The inbox sequence of its queued message (0: none)."""


@pytest.fixture
def root(sandbox_root: Path) -> Path:  # noqa: F811 (the imported fixture)
    own = sandbox_root / uuid.uuid4().hex[:8]
    own.mkdir()
    return own


@contextlib.asynccontextmanager
async def rigged(
    infra: EmbeddedUrls,
    crypto_key: str,
    bus: Bus,
    redis: Redis,
    keys: Keys,
    root: Path,
    script: Script | None = None,
    *,
    spec: RoleSpec = coder.SPEC,
    model_configured: bool = True,
    **sections: dict[str, Any],
) -> AsyncIterator[Rig]:
    async with contextlib.AsyncExitStack() as stack:
        slack = await stack.enter_async_context(FakeSlack())
        slack.state.channels.add(CHANNEL)
        model = await stack.enter_async_context(ScriptedModelServer(script))
        overrides: dict[str, dict[str, Any]] = {
            "nats": {"url": infra.nats},
            "redis": {"url": infra.redis},
            "crypto": {"keys": [crypto_key]},
            "slack": {"api_url": slack.api_url, "bot_token": slack.state.token, "signing_secret": "s"},
            "models": {"base_url": model.base_url, "api_key": "k", "default": MODEL_ID, "max_retries": 0}
            if model_configured
            else {},
            "sandbox": {"local_root": str(root), "creation_timeout": 30, "ready_timeout": 30, "exec_timeout": 30},
            "ingress": {"mention_handle": HANDLE},
        }
        for name, values in sections.items():
            overrides[name] = {**overrides.get(name, {}), **values}
        settings = load_settings(**overrides)
        records = SandboxStore(redis, keys, ServerKeys([crypto_key]))
        provider = LocalProvider(settings.sandbox, records)
        sandboxes = SandboxManager(
            provider=provider,
            records=records,
            metadata=ThreadMetadataStore(redis, keys),
            credentials=NoProxy(),
            redis=redis,
            keys=keys,
            settings=settings.sandbox,
        )
        stack.push_async_callback(provider.aclose)
        stack.push_async_callback(_delete_all, provider)
        stack.push_async_callback(sandboxes.aclose)
        outbound = Outbound.from_settings(settings)
        stack.push_async_callback(outbound.aclose)
        checkpointer = await stack.enter_async_context(open_checkpointer(settings.redis))
        http = await stack.enter_async_context(httpx.AsyncClient())
        parts = RunParts(
            spec=spec,
            factory=Manifest.load().graph_factory(spec.graph),
            settings=settings,
            bus=bus,
            redis=redis,
            keys=keys,
            sandboxes=sandboxes,
            checkpointer=checkpointer,
            outbound=outbound,
            models=Models(settings.models),
            http=http,
        )
        yield Rig(AgentRuns(parts), settings, bus, redis, keys, slack, model, sandboxes)


async def _delete_all(provider: LocalProvider) -> None:
    for handle in await provider.list():
        await provider.delete(handle.id)


Rigging = Callable[..., contextlib.AbstractAsyncContextManager[Rig]]


@pytest.fixture
def rig(infra: EmbeddedUrls, crypto_key: str, bus: Bus, redis: Redis, keys: Keys, root: Path, bwrap: str) -> Rigging:  # noqa: F811
    """``async with rig(script, spec=..., worker={...}) as r:`` builds the runs of a role."""

    def build(script: Script | None = None, **options: Any) -> contextlib.AbstractAsyncContextManager[Rig]:
        return rigged(infra, crypto_key, bus, redis, keys, root, script, **options)

    return build


def finish(text: str = "All done.") -> Script:
    return Script().reply(text)


class TestFinished:
    async def test_a_finished_turn_completes_and_leaves_the_thread_idle(self, rig: Rigging) -> None:
        async with rig(finish()) as r:
            thread = await r.thread()
            cursor = await r.run(thread)

            assert cursor == thread.seq
            assert await r.types(thread) == [EventType.STARTED, EventType.MODEL_CALL, EventType.COMPLETED]
            assert (await r.last(thread))["summary"] == "All done."
            assert await r.state(thread) is ThreadState.IDLE
            # The coder answers through its tools; the loop posts nothing of its own.
            assert r.texts(thread) == []


def _runs(outcome: str) -> float:
    return REGISTRY.get_sample_value("drydock_runs_total", {"role": "coder", "outcome": outcome}) or 0


class TestMetrics:
    async def test_each_run_is_counted_by_its_outcome_and_timed_and_in_progress_while_it_runs(
        self, rig: Rigging
    ) -> None:
        timed = {"role": "coder", "outcome": "completed"}
        before = (_runs("completed"), REGISTRY.get_sample_value("drydock_run_seconds_count", timed) or 0)
        async with rig(Script().reply("Done.", latency=1)) as r:
            thread = await r.thread()
            running = asyncio.create_task(r.run(thread))
            await asyncio.wait_for(r.model.wait_for_requests(1), timeout=30)
            assert REGISTRY.get_sample_value("drydock_runs_in_progress", {"role": "coder"}) == 1
            await asyncio.wait_for(running, timeout=30)

        assert REGISTRY.get_sample_value("drydock_runs_in_progress", {"role": "coder"}) == 0
        assert _runs("completed") == before[0] + 1
        assert REGISTRY.get_sample_value("drydock_run_seconds_count", timed) == before[1] + 1
        assert (REGISTRY.get_sample_value("drydock_run_seconds_bucket", {**timed, "le": "1.0"}) or 0) <= before[1]

    async def test_a_stopped_run_and_one_its_worker_lost_count_apart(self, rig: Rigging) -> None:
        stopped, interrupted = _runs("stopped"), _runs("interrupted")
        async with rig(Script().tool_call("execute", command="true").reply("too late", latency=20)) as r:
            first = await r.thread()
            await StopRequests(r.redis, r.keys).request(first.id, by="ada")
            await r.run(first)

            second = await r.thread()
            task = asyncio.create_task(r.run(second))
            await asyncio.wait_for(r.model.wait_for_requests(2), timeout=30)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

        assert (_runs("stopped"), _runs("interrupted")) == (stopped + 1, interrupted + 1)
        assert REGISTRY.get_sample_value("drydock_runs_in_progress", {"role": "coder"}) == 0


class TestStopped:
    async def test_a_stop_request_ends_the_run_after_the_step_it_arrived_in(self, rig: Rigging) -> None:
        async with rig(Script().tool_call("execute", command="true").reply("never asked")) as r:
            thread = await r.thread()
            await StopRequests(r.redis, r.keys).request(thread.id, by="ada")
            cursor = await r.run(thread)

            assert cursor == thread.seq
            assert await r.types(thread) == [EventType.STARTED, EventType.MODEL_CALL, EventType.STOPPED]
            assert (await r.last(thread))["by"] == "ada"
            assert await r.state(thread) is ThreadState.STOPPED
            assert len(r.model.requests) == 1
            assert not await StopRequests(r.redis, r.keys).pending(thread.id)


class TestLimits:
    async def test_the_step_limit_ends_the_run_with_a_notice(self, rig: Rigging) -> None:
        script = Script().tool_call("execute", command="true").tool_call("execute", command="true")
        async with rig(script, worker={"step_limit": 1}) as r:
            thread = await r.thread()
            cursor = await r.run(thread)

            assert cursor == thread.seq
            assert await r.types(thread) == [
                EventType.STARTED,
                EventType.MODEL_CALL,
                EventType.TOOL_CALL,
                EventType.STEP_LIMIT,
            ]
            assert (await r.last(thread))["model_calls"] == 1
            assert await r.state(thread) is ThreadState.IDLE
            assert len(r.model.requests) == 1
            [notice] = r.texts(thread)
            assert "step limit" in notice

    @staticmethod
    def expensive() -> Script:
        # 200,000 input tokens of gpt-5.1 at $1.25 per million: $0.25, past a $0.10 run limit.
        return Script().tool_call("execute", command="true").usage(prompt=200_000, completion=10).reply("never")

    async def test_a_spend_limit_pauses_a_coder_thread(self, rig: Rigging) -> None:
        async with rig(self.expensive()) as r:
            await r.accounts.save_team(TeamDefaults(budgets=TeamBudgets(run_usd=0.10)))
            thread = await r.thread()
            cursor = await r.run(thread)

            assert cursor == thread.seq
            assert await r.types(thread) == [
                EventType.STARTED,
                EventType.MODEL_CALL,
                EventType.TOOL_CALL,
                EventType.STEP_LIMIT,
            ]
            data = await r.last(thread)
            assert (data["budget"], data["limit_usd"]) == ("run", 0.10)
            assert data["spent_usd"] > 0.10
            assert await r.state(thread) is ThreadState.IDLE
            assert len(r.model.requests) == 1
            paused = await Continuations(r.redis, r.keys).paused(thread.id)
            assert paused is not None
            [notice] = r.told(thread)
            assert notice.text == paused_notice(paused, HANDLE)
            assert notice.blocks, "the notice offers the continue button"

    async def test_a_role_that_does_not_pause_stops_at_the_limit(self, rig: Rigging) -> None:
        async with rig(self.expensive(), spec=replace(coder.SPEC, pauses=False)) as r:
            await r.accounts.save_team(TeamDefaults(budgets=TeamBudgets(run_usd=0.10)))
            thread = await r.thread()
            await r.run(thread)

            assert (await r.last(thread))["budget"] == "run"
            assert await Continuations(r.redis, r.keys).paused(thread.id) is None
            [notice] = r.told(thread)
            assert notice.text.startswith("I stopped at this run's spend limit of $0.10")
            assert notice.text.endswith("The next trigger starts a new run.")
            assert not notice.blocks

    async def test_a_paused_thread_is_refused_before_any_sandbox(self, rig: Rigging) -> None:
        async with rig(finish()) as r:
            thread = await r.thread()
            reached = Reached(kind=LimitKind.RUN, limit_usd=0.10, spent_usd=0.25)
            await Continuations(r.redis, r.keys).pause(thread.id, reached)
            cursor = await r.run(thread)

            assert cursor == thread.seq
            assert await r.types(thread) == [EventType.STEP_LIMIT]
            data = await r.last(thread)
            assert data == {"budget": "refused", "notice": paused_notice(reached, HANDLE)}
            assert await r.state(thread) is ThreadState.IDLE
            [notice] = r.told(thread)
            assert notice.text == paused_notice(reached, HANDLE)
            assert notice.blocks, "the notice offers the continue button"
            assert r.model.requests == []
            assert await r.sandboxes.provider.list() == []

    async def test_a_refused_run_leaves_the_sandbox_it_holds_as_it_was(self, rig: Rigging) -> None:
        async with rig(finish()) as r:
            thread = await r.thread()
            held = await r.sandboxes.ensure_sandbox(thread.id)
            reached = Reached(kind=LimitKind.RUN, limit_usd=0.10, spent_usd=0.25)
            await Continuations(r.redis, r.keys).pause(thread.id, reached)
            # Checked while the budgets are passed: slow enough to be going on at the refusal.
            answers, checked = r.sandboxes._answers, []

            async def slow(*args: Any) -> bool:
                checked.append(args)
                await asyncio.sleep(2)
                return await answers(*args)

            r.sandboxes._answers = slow  # type: ignore[method-assign,assignment]
            await r.run(thread)

            assert await r.types(thread) == [EventType.STEP_LIMIT]
            assert checked, "the held sandbox is checked while the budgets are passed"
            assert [handle.id for handle in await r.sandboxes.provider.list()] == [held.id]
            assert r.sandboxes.cached(thread.id) is held
            assert await r.sandboxes.failures.count(thread.id) == 0


class TestPlanApproval:
    async def test_the_turn_ends_waiting_for_the_owner_with_the_checkout_unchanged(self, rig: Rigging) -> None:
        script = (
            Script()
            .tool_call("write_file", file_path="/workspace/widgets/calc.py", content="changed")
            .reply("My plan waits for your approval.")
        )
        async with rig(script) as r:
            await r.accounts.save_repository(RepositorySettings(full_name="acme/widgets", plan_approval=True))
            thread = await r.thread(fields={REPOSITORY: "acme/widgets"})
            backend = await r.sandboxes.ensure_sandbox(thread.id)
            checkout = "/workspace/widgets"
            assert backend.handle.workspace.rstrip("/") == "/workspace"
            # A checkout already there is used as it is: no clone (and no code host) is needed.
            assert (await backend.run(f"git init -q {checkout}")).exit_code == 0
            script_path = f"{checkout}/calc.py"
            cursor = await r.run(thread)

            assert cursor == thread.seq
            assert await r.types(thread) == [
                EventType.STARTED,
                EventType.MODEL_CALL,
                EventType.TOOL_CALL,
                EventType.MODEL_CALL,
                EventType.COMPLETED,
            ]
            assert await r.state(thread) is ThreadState.IDLE
            refusal = r.model.requests[1].messages[-1]
            assert refusal["role"] == "tool"
            assert PLAN_REQUIRED_TEXT in refusal["content"]
            assert (await backend.run(f"test -e {script_path}")).exit_code != 0


class TestModelFailures:
    async def test_a_failing_model_ends_the_run_with_a_notice(self, rig: Rigging) -> None:
        async with rig(Script().fail(503)) as r:
            thread = await r.thread()
            cursor = await r.run(thread)

            assert cursor == thread.seq
            assert await r.types(thread) == [EventType.STARTED, EventType.ERROR]
            assert "the model failed" in (await r.last(thread))["error"]
            assert await r.state(thread) is ThreadState.FAILED
            [notice] = r.texts(thread)
            assert notice.startswith("I stopped because the model failed: the model endpoint answered 503")
            assert notice.endswith("Reply here to retry.")

    async def test_a_model_that_keeps_answering_empty_ends_the_run_after_the_nudges(self, rig: Rigging) -> None:
        async with rig(Script().empty().empty().empty().empty()) as r:
            thread = await r.thread()
            cursor = await r.run(thread)

            assert cursor == thread.seq
            assert (await r.types(thread))[-1] is EventType.ERROR
            assert await r.state(thread) is ThreadState.FAILED
            assert len(r.model.requests) == 4
            [notice] = r.texts(thread)
            assert notice == (
                "I stopped because the model failed: the model answered with an empty reply 4 times in a row. "
                "Reply here to retry."
            )

    async def test_without_a_model_the_thread_is_told_how_to_configure_one(self, rig: Rigging) -> None:
        async with rig(model_configured=False) as r:
            thread = await r.thread()
            cursor = await r.run(thread)

            assert cursor == thread.seq
            assert await r.types(thread) == [EventType.ERROR]
            assert await r.state(thread) is ThreadState.FAILED
            assert r.texts(thread) == [NO_MODEL_NOTICE]
            assert await r.sandboxes.provider.list() == []

    async def test_a_model_the_catalog_rejects_is_named_in_the_notice(self, rig: Rigging) -> None:
        async with rig(finish()) as r:
            thread = await r.thread(fields={MODEL: "no-such-model"})
            await r.run(thread)

            assert await r.types(thread) == [EventType.ERROR]
            [notice] = r.texts(thread)
            assert notice.startswith("I can't start:")
            assert "no-such-model" in notice
            assert r.model.requests == []


async def nothing_new(setup: RunSetup) -> Prepared:
    raise RunSkipped("No new outcomes of findings since the last refinement.")


class TestPreparation:
    async def test_a_skipped_run_completes_without_the_model(self, rig: Rigging) -> None:
        async with rig(finish(), spec=replace(coder.SPEC, prepare=nothing_new)) as r:
            thread = await r.thread()
            cursor = await r.run(thread)

            assert cursor == thread.seq
            assert await r.types(thread) == [EventType.COMPLETED]
            assert await r.last(thread) == {
                "summary": "No new outcomes of findings since the last refinement.",
                "skipped": True,
            }
            assert await r.state(thread) is ThreadState.IDLE
            assert r.texts(thread) == []
            assert r.model.requests == []

    async def test_a_preparation_that_ends_the_run_tells_the_source(self, rig: Rigging) -> None:
        async with rig(finish(), spec=reviewer.SPEC) as r:
            thread = await r.thread()
            cursor = await r.run(thread)

            assert cursor == thread.seq
            assert await r.types(thread) == [EventType.ERROR]
            assert await r.state(thread) is ThreadState.FAILED
            assert r.texts(thread) == ["This reviewer thread names no repository to review."]
            assert r.model.requests == []

    async def test_a_turn_without_inbox_middleware_and_nothing_queued_is_not_run(self, rig: Rigging) -> None:
        async with rig(finish(), spec=replace(coder.SPEC, inbox_at_start=True)) as r:
            thread = await r.thread(message=False)
            cursor = await r.run(thread)

            assert cursor == 0
            assert await r.types(thread) == [EventType.STARTED, EventType.COMPLETED]
            assert await r.last(thread) == {"summary": "", "skipped": True}
            assert await r.state(thread) is ThreadState.IDLE
            assert r.model.requests == []


async def hold_checkout(sandbox: SandboxBackend) -> None:
    """A checkout of ``acme/widgets`` in ``sandbox``, as an earlier run's clone left it."""
    path = f"{sandbox.handle.workspace.rstrip('/')}/widgets"
    result = await sandbox.run(
        f"git init -q {path} && git -C {path} symbolic-ref refs/remotes/origin/HEAD refs/remotes/origin/main"
    )
    assert result.exit_code == 0, result.output


class TestCheckout:
    async def test_a_clone_that_fails_for_good_ends_the_run(self, rig: Rigging) -> None:
        async with rig(finish()) as r:
            # The sandbox reaches no code host without the credential proxy: the name does not resolve.
            thread = await r.thread(fields={REPOSITORY: "acme/widgets"})
            cursor = await r.run(thread)

            assert cursor == thread.seq
            assert await r.types(thread) == [EventType.ERROR]
            assert await r.state(thread) is ThreadState.FAILED
            [notice] = r.texts(thread)
            assert notice.startswith("I could not clone acme/widgets into my sandbox")
            assert r.model.requests == []

    async def test_a_clone_that_stays_unavailable_fails_the_wake_for_a_redelivery(self, rig: Rigging) -> None:
        async with rig(finish()) as r:
            # A refused connection is an outage worth retrying; it lasts past the (short) window.
            r.runs.checkouts.host = "127.0.0.1:9"
            r.runs.checkouts.clone_window = 1.0
            thread = await r.thread(fields={REPOSITORY: "acme/widgets"})
            with pytest.raises(CloneUnavailable):
                await r.run(thread)

            assert await r.types(thread) == []
            assert await r.state(thread) is None
            assert r.texts(thread) == []

    async def test_the_checkout_the_sandbox_has_is_taken_without_a_clone(self, rig: Rigging) -> None:
        async with rig(finish()) as r:
            thread = await r.thread(fields={REPOSITORY: "acme/widgets"})
            await hold_checkout(await r.sandboxes.ensure_sandbox(thread.id))

            async def no_clone(backend: SandboxBackend, repository: str) -> Checkout:
                raise AssertionError("cloned a checkout the sandbox has")

            r.runs.checkouts.clone = no_clone  # type: ignore[method-assign]
            await r.run(thread)

            assert await r.types(thread) == [EventType.STARTED, EventType.MODEL_CALL, EventType.COMPLETED]

    async def test_a_checkout_in_a_sandbox_no_longer_the_threads_is_not_taken(self, rig: Rigging) -> None:
        async with rig(finish()) as r:
            thread = await r.thread(fields={REPOSITORY: "acme/widgets"})
            earlier = await r.sandboxes.ensure_sandbox(thread.id)
            await hold_checkout(earlier)
            # Another process replaced the thread's sandbox; this one still holds the earlier one.
            replacement = await r.sandboxes.provider.create(thread.id)
            assert await r.metadata.compare_and_set(thread.id, SANDBOX_ID, expected=earlier.id, new=replacement.id)
            ensure = r.sandboxes.ensure_sandbox

            async def slow_ensure(thread_id: str, *, read: ThreadMetadata | None = None) -> SandboxBackend:
                # The look into the earlier sandbox has its answer before the manager finds it replaced.
                await asyncio.sleep(1)
                return await ensure(thread_id, read=read)

            r.sandboxes.ensure_sandbox = slow_ensure  # type: ignore[method-assign]
            await r.run(thread)

            # The replacement has no checkout, and without the credential proxy nothing can be cloned.
            assert await r.types(thread) == [EventType.ERROR]
            [notice] = r.texts(thread)
            assert notice.startswith("I could not clone acme/widgets into my sandbox")
            assert r.model.requests == []


class TestSandbox:
    async def test_sandbox_failures_raise_until_the_circuit_breaker_ends_the_run(self, rig: Rigging) -> None:
        async with rig(finish(), worker={"sandbox_failure_limit": 2}) as r:
            provider = r.sandboxes.provider
            assert isinstance(provider, LocalProvider)
            blocked = provider.root / "blocked"
            blocked.write_text("not a directory")
            provider.root = blocked
            thread = await r.thread()

            with pytest.raises(SandboxError):
                await r.run(thread)
            assert await r.types(thread) == []
            assert r.texts(thread) == []

            cursor = await r.run(thread)
            assert cursor == thread.seq
            assert await r.types(thread) == [EventType.ERROR]
            assert await r.state(thread) is ThreadState.FAILED
            assert r.texts(thread) == [CIRCUIT_OPEN_NOTICE.format(count=2)]
            assert r.model.requests == []


class TestSandboxMidRun:
    async def test_a_sandbox_lost_mid_run_trips_the_circuit_breaker(self, rig: Rigging) -> None:
        script = Script().tool_call("execute", command="true", latency=5).reply("never asked")
        async with rig(script, worker={"sandbox_failure_limit": 1}) as r:
            thread = await r.thread()
            task = asyncio.create_task(r.run(thread))
            await asyncio.wait_for(r.model.wait_for_requests(1), timeout=30)
            for handle in await r.sandboxes.provider.list():
                await r.sandboxes.provider.delete(handle.id)
            cursor = await asyncio.wait_for(task, timeout=60)

            assert cursor == thread.seq
            assert await r.types(thread) == [
                EventType.STARTED,
                EventType.MODEL_CALL,
                EventType.TOOL_CALL,
                EventType.ERROR,
            ]
            assert (await r.last(thread))["error"] == "the sandbox circuit breaker stopped the run"
            assert await r.state(thread) is ThreadState.FAILED
            assert len(r.model.requests) == 1
            [notice] = r.texts(thread)
            assert notice.startswith("I stopped because my sandbox failed 1 times in a row")


class TestLease:
    async def test_a_lost_lease_cancels_the_run_and_the_next_holder_resumes_it(self, rig: Rigging) -> None:
        async with rig(Script().reply("too late", latency=20).reply("Resumed.")) as r:
            thread = await r.thread()
            # Created beforehand: starting a sandbox can hold the event loop up for longer than a
            # short lease, which would then be lost before the model call this test aims at.
            await r.sandboxes.ensure_sandbox(thread.id)
            held = Leases(r.redis, r.keys, ttl=timedelta(seconds=9)).hold(thread.id, "test")

            async def run() -> None:
                async with held as lease:
                    await r.runs(thread.id, lease)

            task = asyncio.create_task(run())
            await asyncio.wait_for(r.model.wait_for_requests(1), timeout=30)
            assert not held.lost, "the lease ran out before the model call: the event loop was held up"
            await r.redis.delete(r.keys.lease(thread.id))
            with pytest.raises(LeaseLost):
                await asyncio.wait_for(task, timeout=30)

            # The run is not over: the next holder resumes it from its checkpoint.
            assert await r.types(thread) == [EventType.STARTED]
            assert await r.state(thread) is ThreadState.RUNNING
            assert r.texts(thread) == []

            await _completed_by_the_next_holder(r, thread, "Resumed.")
            # The resumed turn asks again with what the lost one asked: the message once.
            first, again = r.model.requests
            assert again.texts("user") == first.texts("user")
            assert sum("@drydock please" in text for text in again.texts("user")) == 1

    async def test_a_lease_lost_as_the_run_starts_ends_it_before_it_completes(self, rig: Rigging) -> None:
        async with rig(Script().reply("too late", latency=5)) as r:
            thread = await r.thread()
            held = Leases(r.redis, r.keys, ttl=timedelta(seconds=1.5)).hold(thread.id, "test")

            async def run() -> None:
                async with held as lease:
                    await r.redis.delete(r.keys.lease(thread.id))
                    await r.runs(thread.id, lease)

            with pytest.raises(LeaseLost):
                await asyncio.wait_for(run(), timeout=60)
            assert EventType.COMPLETED not in await r.types(thread)
            assert r.texts(thread) == []

    async def test_a_run_lost_before_its_first_checkpoint_is_started_again(self, rig: Rigging) -> None:
        """A holder that died after announcing its run and before the graph wrote anything left
        the thread running with nothing to resume: the next holder starts the turn anew."""
        async with rig(finish("Started again.")) as r:
            thread = await r.thread()
            started = RunEvent(thread_id=thread.id, run_id="lost", type=EventType.STARTED)
            await r.bus.emit(started)
            await ThreadStates(r.redis, r.keys).observe(started)
            assert await r.state(thread) is ThreadState.RUNNING

            await _completed_by_the_next_holder(r, thread, "Started again.")
            assert r.texts(thread) == []


async def _completed_by_the_next_holder(r: Rig, thread: Thread, summary: str) -> None:
    """The next holder's run of a thread a lost run left running completes it with ``summary``."""
    cursor = await r.run(thread)
    assert cursor == thread.seq
    assert await r.types(thread) == [EventType.STARTED, EventType.STARTED, EventType.MODEL_CALL, EventType.COMPLETED]
    assert (await r.last(thread))["summary"] == summary
    assert await r.state(thread) is ThreadState.IDLE
