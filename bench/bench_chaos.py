"""Chaos on the real pipeline (``tests/e2e/pipeline.py``): disruptions while GitHub mentions flow
through the ingress to the coder worker, then a count of what went wrong.

Scenarios, each on a pipeline of its own, each bounded in deliveries and time:

1. ``worker-sigkill``: one ``drydock serve coder-worker`` process, SIGKILLed at random moments
   and started again at once;
2. ``nats-restart``: the embedded nats-server stopped and started again, its store kept;
3. ``valkey-restart``: the embedded Valkey, appending to a file (AOF), stopped and started again;
4. ``ingress-sigkill``: a ``drydock serve ingress`` process SIGKILLed under load and started again;
5. ``ingress-twice``: two ingress processes; every delivery sent to both at the same moment;
6. ``stop``: the stop store (the dashboard's stop button) asked at a random moment of each run.

In scenarios 1-4 the GitHub double sends each delivery as GitHub does: once, to the App's
webhook, recording the attempt. GitHub never sends a failed delivery again by itself, so one the
ingress answered 503 (NATS or Valkey down) or never answered (the ingress killed) comes back only
when the active autofix controller's sweep asks for it (``drydock.channels.github.redelivery``).
In scenarios 5 and 6 a sender of the bench's own posts each delivery and retries it.

Every delivery is a mention on an issue of its own (one thread per delivery). The scripted model
answers a run's first call with a ``github_comment`` tool call and its second with a final reply,
each after a random latency, so disruptions hit runs at every point.

Definitions, per scenario:

- deliveries: signed webhooks sent; the bench's own sender retries each (same body, same delivery
  id) until it is answered 2xx or its deadline passes;
- lost: a delivery GitHub sent (whatever its first answer), or one the bench's sender had answered
  2xx, whose thread never had a run that completed, nor a dead letter (in the stop scenario, a
  run stopped by the request counts as answered too);
- duplicated: threads with more than one reply comment (the dead letter's notice not counted) or
  more than one pull request in the GitHub double;
- stuck: threads whose lease is still held, or whose last run event is a start with no ending,
  after the scenario's settle time;
- resume: from a disruption to the next model call of each thread whose run was in flight at
  that moment (started, not ended); p50 and max over all disruptions of the scenario.

Settings are the defaults (lease TTL 30 s, ack wait 60 s, heartbeat 15 s), except the pipeline's
test doubles and addresses and the redelivery sweep's interval (:data:`REDELIVER_INTERVAL`). The
target for resume p50 is the lease TTL + 5 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from redis.exceptions import RedisError

from drydock.bus import EventType, RunEvent
from drydock.bus.subjects import EVENT
from drydock.config import LeaseSettings, LogFormat, LogSettings, NatsSettings, WorkerSettings
from drydock.embedded import free_port
from drydock.telemetry.logging import configure_logging
from drydock.threads import ids
from drydock.threads.stops import StopRequests
from drydock.worker.dead_letters import DeadLetters
from tests.e2e.pipeline import GITHUB_SECRET, MEMBER, ORG, REPOSITORY, Stage, pipeline
from tests.e2e.test_github_issue import mention
from tests.fakes import signing
from tests.fakes.github.activity import activity_of
from tests.fakes.openai_server import ReceivedRequest, Script
from tests.fakes.signing import SignedRequest

SEED = 19
LEASE_TTL = LeaseSettings.model_fields["ttl"].default.total_seconds()
DEFAULTS: dict[str, dict[str, Any]] = {
    "lease": {"ttl": LEASE_TTL},
    "nats": {"run_ack_wait": NatsSettings.model_fields["run_ack_wait"].default.total_seconds()},
    "worker": {"heartbeat": WorkerSettings.model_fields["heartbeat"].default.total_seconds()},
}
"""The pipeline shortens these for its tests; the benchmark puts the defaults back."""
REDELIVER_INTERVAL = 5.0
"""Seconds between the controller's sweeps for failed deliveries (60 by default): a delivery
failed in a disruption is asked for again within a scenario's settle time."""
SEND_DEADLINE = 90.0
"""How long a sender retries one delivery."""
SETTLE = 4 * LEASE_TTL + 60
"""How long after the last delivery the runs have to end."""
RELEASE_GRACE = 15.0
"""How long after its run ended a thread has to release its lease."""
NOTICE = "I could not finish this after"
REPLY = "Done: replied on the issue."
ENDINGS = {EventType.COMPLETED, EventType.ERROR, EventType.STOPPED, EventType.STEP_LIMIT}


def marker(number: int) -> str:
    return f"[chaos-{number}]"


def thread_of(number: int) -> str:
    return ids.github_issue("github.com", ORG, "widgets", number)


def number_of(request: ReceivedRequest, numbers: range) -> int | None:
    text = "\n".join(request.texts("user"))
    for number in numbers:
        if marker(number) in text:
            return number
    return None


def chaos_responder(rng: random.Random) -> Callable[[ReceivedRequest], Script]:
    """The first call of a run comments on the issue, the second ends the run; each waits a random
    0.3 to 2.5 s, so a disruption meets runs in their model calls, tool calls and checkpoints."""

    def respond(request: ReceivedRequest) -> Script:
        latency = rng.uniform(0.3, 2.5)
        if any(message.get("role") == "tool" for message in request.messages):
            return Script().reply("done", latency=latency)
        return Script().tool_call("github_comment", body=REPLY, latency=latency)

    return respond


@dataclass
class Outcome:
    name: str
    deliveries: int = 0
    answered: int = 0
    lost: int = 0
    duplicated: int = 0
    stuck: int = 0
    resumes: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        if self.resumes:
            resume = f"{statistics.median(self.resumes):6.1f} s {max(self.resumes):6.1f} s (n={len(self.resumes)})"
        else:
            resume = f"{'-':>8} {'-':>8}"
        return (
            f"{self.name:<16} {self.deliveries:>10} {self.answered:>8} {self.lost:>5} {self.duplicated:>11} "
            f"{self.stuck:>6}  {resume}"
        )


HEADER = (
    f"{'scenario':<16} {'deliveries':>10} {'2xx':>8} {'lost':>5} {'duplicated':>11} {'stuck':>6}  "
    f"{'resume p50':>8} {'max':>8}"
)


class Observer:
    """Follows the run events as they are published: when each thread's runs end."""

    def __init__(self) -> None:
        self.ended_at: dict[str, float] = {}
        self.started_at: dict[str, float] = {}

    async def follow(self, stage: Stage) -> None:
        async def on_event(message: Msg) -> None:
            event = RunEvent.model_validate_json(message.data)
            if event.type is EventType.STARTED:
                self.started_at[event.thread_id] = time.monotonic()
            elif event.type in ENDINGS:
                self.ended_at[event.thread_id] = time.monotonic()

        await stage.runtime.nats.subscribe(f"{EVENT}.*.*", cb=on_event)


class Chaos:
    """One scenario's deliveries, disruptions and the count afterwards."""

    def __init__(self, stage: Stage, name: str, numbers: range, rng: random.Random) -> None:
        self.stage = stage
        self.numbers = numbers
        self.rng = rng
        self.outcome = Outcome(name)
        self.answered: set[int] = set()
        self.disruptions: list[float] = []
        self.affected: list[set[str]] = []
        self.retries = 0
        self.guids: dict[int, str] = {}
        """The delivery id of each delivery the GitHub double sent, by issue number."""
        self.observer = Observer()

    def request(self, number: int) -> SignedRequest:
        payload = mention(self.stage, f"@drydock please answer {marker(number)}", number=number)
        return signing.github(GITHUB_SECRET, "issue_comment", payload)

    async def send(self, number: int, urls: Callable[[], list[str]]) -> None:
        """Send one delivery to each of ``urls()`` at once, again on every non-2xx or error."""
        signed = self.request(number)
        self.outcome.deliveries += 1
        deadline = time.monotonic() + SEND_DEADLINE
        async with httpx.AsyncClient(timeout=30) as client:

            async def post(url: str) -> bool:
                try:
                    answer = await client.post(url + signed.path, content=signed.body, headers=signed.headers)
                except httpx.HTTPError:
                    return False
                except AttributeError:
                    # httpcore on anyio under uvloop, when the ingress dies as the connection opens:
                    # the socket is gone before its TLS attribute is read. A refused send, retried.
                    return False
                return answer.is_success

            while time.monotonic() < deadline:
                if any(await asyncio.gather(*(post(url) for url in urls()))):
                    self.answered.add(number)
                    self.outcome.answered += 1
                    return
                self.retries += 1
                await asyncio.sleep(0.5)

    async def deliver_as_github(self, url: str, *, spacing: float) -> None:
        """Each delivery sent once by the GitHub double to the App's webhook at ``url``; every one
        must end in a run, whatever the ingress first answered."""
        stage = self.stage
        stage.github.configure_webhook(stage.app, f"{url}/webhooks/github", GITHUB_SECRET)

        async def send(number: int) -> None:
            payload = mention(stage, f"@drydock please answer {marker(number)}", number=number)
            self.answered.add(number)
            self.guids[number] = (await stage.github.deliver_webhook(stage.app, "issue_comment", payload)).guid

        senders = []
        for number in self.numbers:
            self.outcome.deliveries += 1
            senders.append(asyncio.create_task(send(number)))
            await asyncio.sleep(spacing)
        await asyncio.gather(*senders)

    def count_github_attempts(self) -> None:
        """The 2xx column and the redeliveries, from the GitHub double's record of attempts."""
        attempts = [self.stage.github.webhook_deliveries(guid) for guid in self.guids.values()]
        self.outcome.answered = sum(any(a.status == "OK" for a in tried) for tried in attempts)
        failed_first = sum(tried[0].status != "OK" for tried in attempts if tried)
        self.retries = sum(a.redelivery for tried in attempts for a in tried)
        self.outcome.notes.append(f"{failed_first} deliveries failed at their first attempt")

    async def deliver_all(self, urls: Callable[[], list[str]], *, spacing: float) -> None:
        senders = []
        for number in self.numbers:
            senders.append(asyncio.create_task(self.send(number, urls)))
            await asyncio.sleep(spacing)
        await asyncio.gather(*senders)

    def in_flight(self) -> set[str]:
        """Threads whose run has started and not ended."""
        observer = self.observer
        return {thread for thread, started in observer.started_at.items() if observer.ended_at.get(thread, 0) < started}

    async def disrupt(self, at: list[float], action: Callable[[], Awaitable[None]]) -> None:
        """Run ``action`` at each of the offsets ``at`` (seconds from now), noting the moment and
        the runs it met."""
        began = time.monotonic()
        for offset in sorted(at):
            await asyncio.sleep(max(0.0, began + offset - time.monotonic()))
            self.disruptions.append(time.monotonic())
            self.affected.append(self.in_flight())
            await action()

    async def catch_up(self, threads: set[str]) -> None:
        """Take the endings the observer missed (published while its connection was down) from
        the events stream."""
        observer = self.observer
        for thread in {t for t in threads if t not in observer.ended_at} | self.in_flight():
            with contextlib.suppress(NatsError, TimeoutError):
                events = await self.stage.events(thread)
                kinds = [e.type for e in events if e.type is EventType.STARTED or e.type in ENDINGS]
                if kinds and kinds[-1] in ENDINGS:
                    observer.ended_at[thread] = time.monotonic()

    @property
    def disruptions_done(self) -> int:
        return len(self.disruptions)

    async def settle_and_count(self, *, stopped_counts: bool = False) -> Outcome:
        stage, outcome = self.stage, self.outcome
        wanted = {thread_of(n) for n in self.answered}
        deadline = time.monotonic() + SETTLE
        letters: set[str] = set()
        while time.monotonic() < deadline:
            # The bench's own connections meet a restarted store like the services do: once.
            with contextlib.suppress(RedisError):
                letters = {
                    letter.thread_id for letter in await DeadLetters(stage.runtime.redis, stage.runtime.keys).all()
                }
                if all(t in self.observer.ended_at or t in letters for t in wanted) and not self.in_flight():
                    break
            await self.catch_up(wanted)
            await asyncio.sleep(1)
        release_by = time.monotonic() + RELEASE_GRACE
        held: set[str] = set()
        while True:
            with contextlib.suppress(RedisError):
                held = {t for t in wanted if await stage.runtime.redis.exists(stage.runtime.keys.lease(t))}
            if not held or time.monotonic() > release_by:
                break
            await asyncio.sleep(0.5)
        letters = {letter.thread_id for letter in await DeadLetters(stage.runtime.redis, stage.runtime.keys).all()}
        if self.guids:
            self.count_github_attempts()
        activity = activity_of(stage.github.state)
        answers = {EventType.COMPLETED, EventType.STOPPED} if stopped_counts else {EventType.COMPLETED}
        endings: dict[str, int] = {}
        for number in self.numbers:
            thread = thread_of(number)
            events = await stage.events(thread)
            kinds = [event.type for event in events]
            if number in self.answered and not (answers & set(kinds)) and thread not in letters:
                outcome.lost += 1
                outcome.notes.append(f"lost: issue {number}, events {[k.value for k in kinds]}")
            replies = [
                c for c in activity.comments_on(REPOSITORY, number) if c.login != MEMBER and NOTICE not in c.body
            ]
            if len(replies) > 1:
                outcome.duplicated += 1
                calls = sum(1 for r in stage.model.requests if number_of(r, self.numbers) == number)
                bodies = [c.body[:70].replace("\n", " ") for c in replies]
                outcome.notes.append(
                    f"duplicated: issue {number}, {len(replies)} replies {bodies}, {calls} model calls"
                )
            for kind in set(kinds) & ENDINGS:
                endings[kind.value] = endings.get(kind.value, 0) + 1
            lifecycle = [k for k in kinds if k is EventType.STARTED or k in ENDINGS]
            running = bool(lifecycle) and lifecycle[-1] is EventType.STARTED
            if thread in held or running:
                outcome.stuck += 1
                outcome.notes.append(f"stuck: issue {number}, lease held {thread in held}, last {lifecycle[-1:]}")
            if stopped_counts and EventType.STOPPED in kinds:
                after = kinds[kinds.index(EventType.STOPPED) + 1 :]
                if EventType.MODEL_CALL in after:
                    outcome.notes.append(f"ran on after its stop: issue {number}, events {[k.value for k in kinds]}")
        outcome.notes.append(
            f"threads with each ending: {dict(sorted(endings.items()))}, dead letters {len(letters & wanted)}, "
            f"{self.disruptions_done} disruptions, {self.retries} deliveries sent again"
            + (" (redelivered by GitHub on the controller's request)" if self.guids else "")
        )
        requests = stage.model.requests
        for moment, affected in zip(self.disruptions, self.affected, strict=True):
            for thread in affected:
                later = [
                    r.received_at
                    for r in requests
                    if r.received_at > moment
                    and (n := number_of(r, self.numbers)) is not None
                    and thread_of(n) == thread
                ]
                if later:
                    outcome.resumes.append(min(later) - moment)
        return outcome


@contextlib.asynccontextmanager
async def chaos(
    name: str, root: Path, numbers: range, *, store: bool = False, worker_process: bool = False
) -> AsyncIterator[Chaos]:
    rng = random.Random(f"{SEED}-{name}")
    async with pipeline(
        root,
        responder=chaos_responder(rng),
        in_process_worker=not worker_process,
        store=root / "store" if store else None,
        lease=DEFAULTS["lease"],
        nats=DEFAULTS["nats"],
        worker=DEFAULTS["worker"],
        autofix_controller=True,
        github={"redeliver_interval": REDELIVER_INTERVAL},
    ) as stage:
        run = Chaos(stage, name, numbers, rng)
        await run.observer.follow(stage)
        yield run


def ingress_url(stage: Stage) -> str:
    return str(stage.ingress.base_url).rstrip("/")


def in_process_ingress(stage: Stage) -> Callable[[], list[str]]:
    url = ingress_url(stage)
    return lambda: [url]


async def until_listening(port: int, process: asyncio.subprocess.Process, within: float = 60.0) -> None:
    async with asyncio.timeout(within):
        while process.returncode is None:
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"the process on port {port} exited with {process.returncode}")


class IngressProcess:
    """``drydock serve ingress`` on a port of its own, which survives restarts."""

    def __init__(self, stage: Stage, name: str) -> None:
        self.stage = stage
        self.name = name
        self.port = free_port()
        self.metrics_port = free_port()
        """Its own: the default (9464) is one per machine, and several ingress processes run here."""
        self.process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        environment = self.stage.nats_user("ingress") | {
            "DRYDOCK_HTTP_HOST": "127.0.0.1",
            "DRYDOCK_HTTP_PORT": str(self.port),
            "DRYDOCK_HTTP_METRICS_PORT": str(self.metrics_port),
        }
        # A restart can find a port taken for a moment (another process on the shared machine got
        # it as an ephemeral port): try again for a few seconds, then fail with the log's tail.
        for attempt in range(5):
            self.process = await self.stage.start_service_process("ingress", name=self.name, environment=environment)
            try:
                await until_listening(self.port, self.process)
                return
            except RuntimeError as failed:
                tail = (self.stage.root / f"{self.name}.log").read_text(errors="replace")[-600:]
                if attempt == 4:
                    raise RuntimeError(f"{failed}:\n{tail}") from None
                print(f"{self.name} did not start ({failed}); again in 1 s. Its log ends:\n{tail}", flush=True)
                await asyncio.sleep(1)

    async def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()


async def worker_sigkill(root: Path) -> Outcome:
    async with chaos("worker-sigkill", root, range(100, 116), worker_process=True) as run:
        worker = await run.stage.start_worker_process(name="worker-0")
        kills = 0

        async def kill_and_restart() -> None:
            nonlocal worker, kills
            worker.send_signal(signal.SIGKILL)
            await worker.wait()
            kills += 1
            worker = await run.stage.start_worker_process(name=f"worker-{kills}")

        moments = [run.rng.uniform(4, 20) for _ in range(3)]
        await asyncio.gather(
            run.deliver_as_github(ingress_url(run.stage), spacing=1.0), run.disrupt(moments, kill_and_restart)
        )
        return await run.settle_and_count()


async def server_restart(root: Path, name: str, server: str) -> Outcome:
    async with chaos(name, root, range(200, 216), store=server == "valkey") as run:

        async def restart() -> None:
            embedded = run.stage.servers[server]
            await embedded.stop()
            await asyncio.sleep(1)
            await embedded.start()

        moments = [run.rng.uniform(4, 16) for _ in range(2)]
        await asyncio.gather(run.deliver_as_github(ingress_url(run.stage), spacing=1.0), run.disrupt(moments, restart))
        return await run.settle_and_count()


async def ingress_sigkill(root: Path) -> Outcome:
    async with chaos("ingress-sigkill", root, range(300, 330)) as run:
        ingress = IngressProcess(run.stage, "ingress")
        await ingress.start()

        async def kill_and_restart() -> None:
            await ingress.kill()
            await ingress.start()

        moments = [run.rng.uniform(1, 8) for _ in range(2)]
        await asyncio.gather(run.deliver_as_github(ingress.url, spacing=0.3), run.disrupt(moments, kill_and_restart))
        outcome = await run.settle_and_count()
        outcome.resumes.clear()
        return outcome


async def ingress_twice(root: Path) -> Outcome:
    async with chaos("ingress-twice", root, range(400, 420)) as run:
        first, second = IngressProcess(run.stage, "ingress-a"), IngressProcess(run.stage, "ingress-b")
        await asyncio.gather(first.start(), second.start())
        await run.deliver_all(lambda: [first.url, second.url], spacing=0.3)
        return await run.settle_and_count()


async def stop_at_random(root: Path) -> Outcome:
    async with chaos("stop", root, range(500, 516)) as run:
        stops = StopRequests(run.stage.runtime.redis, run.stage.runtime.keys, ttl=timedelta(minutes=2))

        async def deliver_then_stop(number: int) -> None:
            await run.send(number, in_process_ingress(run.stage))
            await asyncio.sleep(run.rng.uniform(0, 4))
            await stops.request(thread_of(number), by="chaos")

        tasks = []
        for number in run.numbers:
            tasks.append(asyncio.create_task(deliver_then_stop(number)))
            await asyncio.sleep(0.7)
        await asyncio.gather(*tasks)
        return await run.settle_and_count(stopped_counts=True)


SCENARIOS: list[tuple[str, Callable[[Path], Awaitable[Outcome]]]] = [
    ("worker-sigkill", worker_sigkill),
    ("nats-restart", lambda root: server_restart(root, "nats-restart", "nats")),
    ("valkey-restart", lambda root: server_restart(root, "valkey-restart", "valkey")),
    ("ingress-sigkill", ingress_sigkill),
    ("ingress-twice", ingress_twice),
    ("stop", stop_at_random),
]


async def main() -> None:
    # As a service logs (``drydock serve``): without it, structlog's default renders every
    # failed run's traceback with its locals, which stalls the event loop for seconds.
    configure_logging(LogSettings(level="WARNING"), LogFormat.CONSOLE)
    outcomes = []
    started = time.monotonic()
    for name, scenario in SCENARIOS:
        with tempfile.TemporaryDirectory(prefix=f"bench-chaos-{name}-") as directory:
            began = time.monotonic()
            outcome = await scenario(Path(directory))
            print(f"{name}: {time.monotonic() - began:.0f} s", flush=True)
            outcomes.append(outcome)
    print(HEADER)
    for outcome in outcomes:
        print(outcome.line())
    for outcome in outcomes:
        for note in outcome.notes:
            print(f"  {outcome.name}: {note}")
    resumes = [r for o in outcomes for r in o.resumes]
    verdict = all(o.lost == o.duplicated == o.stuck == 0 for o in outcomes) and (
        not resumes or all(not o.resumes or statistics.median(o.resumes) < LEASE_TTL + 5 for o in outcomes)
    )
    print(
        f"target 0 lost, 0 duplicated, 0 stuck, resume p50 < {LEASE_TTL + 5:.0f} s: {'met' if verdict else 'MISSED'}"
        f"  ({time.monotonic() - started:.0f} s in all)",
        flush=True,
    )
