"""Concurrent runs in one worker process (issue 23 item 4).

For each count N in :data:`COUNTS`, a fresh pipeline (``tests/e2e/pipeline.py``: embedded NATS and
Valkey, ingress, credential proxy, local sandboxes in bubblewrap, the GitHub and model doubles)
with ONE coder worker as a separate process (``drydock serve coder-worker``, concurrency N): N
mentions on N issues, each run cloning the repository into its own sandbox and making
:data:`STEPS` model calls of :data:`MODEL_LATENCY` seconds each (``web_search`` calls, a
``github_comment`` reply, a closing text), so runs mostly wait on the model, as they do in
production.

Measured from ``/proc`` of the worker process alone: its RSS idle and at the peak of active runs
(memory per active run: their difference over N; target at most 500 KiB), and its CPU time during
the phase per model call (CPU per step; target flat as N grows), and its CPU while idle with its N
places waiting for wakes (which should not grow with N). Beside them, their floor: the framework
alone (:mod:`bench.floor_agent`) holding N conversations of the same calls at once against the
same model double, in a process of its own measured the same way. Nothing lost: every run
completes and every issue gets its reply. The sandboxes' own memory (proportional set size of
every daemon process and its children) says how many this machine holds.

Runs overlap only as long as they last: on two shared cores sandboxes are created and cloned
into at one to two runs per second, so with the default three searches (about 10 s of model
time per run) about a hundred runs are in progress at once whatever N; the memory per active run
is taken over the runs in progress at the RSS peak. ``BENCH_CONCURRENCY_SEARCHES`` lengthens
the runs (100 make every run of N=300 overlap here, at 200 s of model time each).

What the control plane serves for these runs, from the servers themselves: the commands Valkey
executed (``INFO commandstats``, a script's own commands counted with it) and the messages
JetStream stored (every stream's last sequence), per run, per model call and per second of a run
in progress. The pipeline's other parts (the ingress, the credential proxy) count with the worker:
these are what a thread costs the installation, not the worker alone.

``pdm run bench concurrency`` (``BENCH_CONCURRENCY_COUNTS=50,150``: other counts)
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from nats.aio.msg import Msg

from bench.harness import cpu_seconds, rss_kib
from drydock.bus import EventType, RunEvent
from drydock.bus.streams import EVENTS_STREAM
from drydock.bus.subjects import EVENT
from drydock.config import LeaseSettings, NatsSettings, WorkerSettings
from drydock.threads import ids
from tests.e2e.pipeline import MEMBER, ORG, REPOSITORY, Stage, pipeline, sandbox_processes
from tests.e2e.test_github_issue import mention
from tests.fakes.github.activity import activity_of
from tests.fakes.openai_server import ReceivedRequest, Responder, Script

COUNTS = (50, 150, 300)
MODEL_LATENCY = 2.0
SEARCHES = int(os.environ.get("BENCH_CONCURRENCY_SEARCHES", "3"))
STEPS = SEARCHES + 2
"""Model calls per run: the searches, the reply's tool call, the closing text."""
REPLY = "bench reply"
MEMORY_TARGET_KIB = 500
FIRST_ISSUE = 5000
WARMUP = 5
"""Runs before the measured ones."""
IDLE_SECONDS = 5.0
"""How long the worker's idle CPU is measured, all its places waiting, before the mentions."""
BATCH = 25
"""Webhooks delivered at once."""
HEARTBEAT, LEASE_TTL, ACK_WAIT = (
    duration.total_seconds()
    for duration in (WorkerSettings().heartbeat, LeaseSettings().ttl, NatsSettings().run_ack_wait)
)
"""A deployment's defaults: in-progress acknowledgements every 15 s, a lease of 30 s renewed every
10 s, an ack wait of 60 s."""


def responder() -> Responder:
    """By how far the conversation is (concurrent runs interleave their requests)."""

    def respond(request: ReceivedRequest) -> Script:
        results = sum(1 for message in request.messages if message.get("role") == "tool")
        if results < SEARCHES:
            return Script().tool_call("web_search", query="drydock")
        if results == SEARCHES:
            return Script().tool_call("github_comment", body=REPLY)
        return Script().reply("done")

    return respond


def thread_of(number: int) -> str:
    return ids.github_issue("github.com", ORG, "widgets", number)


def with_descendants(pids: list[int]) -> list[int]:
    """``pids`` and every process descended from them (a daemon's command line does not name its
    directory, the ``bwrap`` that started it does)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                parent = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(name))
    found, todo = set(pids), list(pids)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return sorted(found)


def _is_daemon(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"drydock.sandbox.daemon" in argv and not argv[0].endswith(b"bwrap")


def pss_kib(pids: list[int]) -> int:
    """The summed proportional set size of ``pids`` (shared pages split between their users)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
        except OSError:
            continue
    return total


def available_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


async def ended(stage: Stage, type: EventType) -> set[str]:
    """The threads with an event of ``type`` in the events stream: counted where the events are
    stored, so a slow subscriber that the server cut off misses none."""
    info = await stage.runtime.bus.js.stream_info(EVENTS_STREAM, subjects_filter=f"{EVENT}.*.{type.value}")
    return {subject.split(".")[2] for subject in info.state.subjects or {}}


async def all_completed(stage: Stage, threads: set[str], *, within: float, progress: str = "") -> set[str]:
    """Wait until every thread of ``threads`` completed a run, or ``within`` seconds; the completed ones."""
    deadline = time.monotonic() + within
    while True:
        done = await ended(stage, EventType.COMPLETED) & threads
        if done == threads or time.monotonic() > deadline:
            return done
        await asyncio.sleep(2)


@dataclass(frozen=True)
class Traffic:
    """Counters of the control plane: commands Valkey executed, by name, and messages each
    JetStream stream stored."""

    commands: Counter[str]
    stored: Counter[str]

    def __sub__(self, earlier: Traffic) -> Traffic:
        return Traffic(self.commands - earlier.commands, self.stored - earlier.stored)


async def traffic(stage: Stage) -> Traffic:
    stats = await stage.runtime.redis.info("commandstats")
    commands = Counter({str(name).removeprefix("cmdstat_"): int(entry["calls"]) for name, entry in stats.items()})
    streams = await stage.runtime.bus.js.streams_info()
    return Traffic(commands, Counter({info.config.name or "": info.state.last_seq for info in streams}))


@dataclass(frozen=True)
class Floor:
    """The framework alone holding ``count`` runs at once (:mod:`bench.floor_agent`)."""

    count: int
    idle_kib: int
    peak_kib: int
    cpu_seconds: float
    model_calls: int

    @property
    def kib_per_run(self) -> float:
        return (self.peak_kib - self.idle_kib) / max(self.count, 1)

    @property
    def cpu_ms_per_step(self) -> float:
        return self.cpu_seconds * 1000 / max(self.model_calls, 1)


async def floor(stage: Stage, count: int) -> Floor:
    """Run the floor's process on ``stage``'s model double and measure it as the worker is measured."""
    log = (stage.root / f"floor-{count}.log").open("ab")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.floor_agent",
        str(count),
        str(WARMUP),
        env=stage.environment(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=log,
    )
    log.close()
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        async with asyncio.timeout(600):
            ready = await process.stdout.readline()
        if ready != b"ready\n":
            raise RuntimeError(f"the floor's process did not start: see {stage.root}/floor-{count}.log")
        idle = peak = rss_kib(process.pid)
        cpu_before = cpu_seconds(process.pid)
        requests_before = stage.model.received
        process.stdin.write(b"go\n")
        await process.stdin.drain()
        done = asyncio.ensure_future(process.stdout.readline())
        async with asyncio.timeout(1800):
            while not done.done():
                peak = max(peak, rss_kib(process.pid))
                stage.model.forget_requests()
                await asyncio.wait({done}, timeout=0.5)
        if done.result() != b"done\n":
            raise RuntimeError(f"the floor's runs failed: see {stage.root}/floor-{count}.log")
        used = cpu_seconds(process.pid) - cpu_before
        return Floor(count, idle, peak, used, stage.model.received - requests_before)
    finally:
        process.stdin.close()
        try:
            async with asyncio.timeout(30):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()


@dataclass
class Phase:
    count: int
    completed: int
    failed: int
    replied: int
    seconds: float
    idle_kib: int
    idle_cpu_ms_per_s: float
    peak_kib: int
    running_at_peak: int
    most_running: int
    cpu_seconds: float
    model_calls: int
    sandboxes: int
    sandbox_pss_kib: int
    available_before_kib: int
    traffic: Traffic
    run_seconds: float
    """The runs' durations summed, from each one's start to its end (events)."""
    floor: Floor

    @property
    def kib_per_run(self) -> float:
        """The growth at the peak over the most runs in progress at once (all N once they
        overlap): RSS does not shrink as runs end, so the peak comes at or after that moment."""
        return (self.peak_kib - self.idle_kib) / max(self.most_running, 1)

    @property
    def cpu_ms_per_step(self) -> float:
        return self.cpu_seconds * 1000 / max(self.model_calls, 1)


async def phase(root: Path, count: int) -> Phase:
    async with pipeline(
        root,
        responder=responder(),
        model_latency=MODEL_LATENCY,
        in_process_worker=False,
        sandbox={"creation_timeout": 900, "ready_timeout": 300},
        # The defaults of a deployment, not the pipeline's short ones for tests: at the start of
        # hundreds of runs on two shared cores a 5 s lease lapses between renewals, and an
        # in-progress acknowledgement every second per run is work no deployment does.
        worker={"concurrency": count, "heartbeat": HEARTBEAT},
        lease={"ttl": LEASE_TTL},
        nats={"run_ack_wait": ACK_WAIT},
    ) as stage:
        available_before = available_kib()
        worker = await stage.start_worker_process(name=f"worker-{count}")
        # Warm: a few runs first, so that what the first run imports and caches once per process
        # does not count as the memory of the runs measured.
        warm = range(FIRST_ISSUE - WARMUP, FIRST_ISSUE)
        await asyncio.gather(
            *(stage.deliver_github("issue_comment", mention(stage, "@drydock warm up", number=n)) for n in warm)
        )
        await all_completed(stage, {thread_of(n) for n in warm}, within=600)
        if worker.returncode is not None:
            raise RuntimeError(f"the worker exited with {worker.returncode}: see {root}/worker-{count}.log")
        running: dict[str, float] = {}
        most_running = 0
        run_seconds = 0.0

        async def on_event(message: Msg) -> None:
            nonlocal most_running, run_seconds
            event = RunEvent.model_validate_json(message.data)
            if event.type is EventType.STARTED:
                running[event.thread_id] = time.monotonic()
                most_running = max(most_running, len(running))
            elif event.type in {EventType.COMPLETED, EventType.ERROR, EventType.STEP_LIMIT}:
                began = running.pop(event.thread_id, None)
                if began is not None:
                    run_seconds += time.monotonic() - began

        await stage.runtime.nats.subscribe(f"{EVENT}.*.*", cb=on_event)
        idle = rss_kib(worker.pid)
        idle_cpu = cpu_seconds(worker.pid)
        await asyncio.sleep(IDLE_SECONDS)
        idle_cpu_ms_per_s = (cpu_seconds(worker.pid) - idle_cpu) * 1000 / IDLE_SECONDS
        traffic_before = await traffic(stage)
        cpu_before = cpu_seconds(worker.pid)
        requests_before = stage.model.received
        peak = idle
        running_at_peak = 0
        sandboxes_peak = 0
        sandbox_pss = 0
        started = time.perf_counter()
        numbers = range(FIRST_ISSUE, FIRST_ISSUE + count)
        threads = {thread_of(n) for n in numbers}
        for first in range(0, count, BATCH):
            await asyncio.gather(
                *(
                    stage.deliver_github("issue_comment", mention(stage, "@drydock search", number=n))
                    for n in numbers[first : first + BATCH]
                )
            )

        async def sample() -> None:
            nonlocal peak, running_at_peak, sandboxes_peak, sandbox_pss
            ticks = 0
            while True:
                stage.model.forget_requests()
                rss = rss_kib(worker.pid)
                if rss > peak:
                    peak, running_at_peak = rss, len(running)
                ticks += 1
                if ticks % 10 == 0:
                    pids = with_descendants(sandbox_processes(root / "sandboxes"))
                    daemons = len([pid for pid in pids if _is_daemon(pid)])
                    if daemons >= sandboxes_peak:
                        sandboxes_peak = daemons
                        sandbox_pss = pss_kib(pids)
                if ticks % 40 == 0:
                    done = await ended(stage, EventType.COMPLETED) & threads
                    print(
                        f"  N={count}, after {time.perf_counter() - started:.0f} s: {len(done)} completed, "
                        f"{len(running)} in progress, worker RSS {rss_kib(worker.pid) / 1024:.0f} MiB",
                        flush=True,
                    )
                await asyncio.sleep(0.5)

        sampler = asyncio.create_task(sample())
        try:
            completed = await all_completed(stage, threads, within=1800)
        finally:
            sampler.cancel()
        failed = (await ended(stage, EventType.ERROR) | await ended(stage, EventType.STEP_LIMIT)) & threads
        seconds = time.perf_counter() - started
        used = cpu_seconds(worker.pid) - cpu_before
        served = await traffic(stage) - traffic_before
        model_calls = stage.model.received - requests_before
        framework = await floor(stage, count)
        activity = activity_of(stage.github.state)
        replied = sum(
            any(REPLY in comment.body and comment.login != MEMBER for comment in activity.comments_on(REPOSITORY, n))
            for n in numbers
        )
        return Phase(
            count=count,
            completed=len(completed),
            failed=len(failed),
            replied=replied,
            seconds=seconds,
            idle_kib=idle,
            idle_cpu_ms_per_s=idle_cpu_ms_per_s,
            peak_kib=peak,
            running_at_peak=running_at_peak,
            most_running=most_running,
            cpu_seconds=used,
            model_calls=model_calls,
            sandboxes=sandboxes_peak,
            sandbox_pss_kib=sandbox_pss,
            available_before_kib=available_before,
            traffic=served,
            run_seconds=run_seconds,
            floor=framework,
        )


def report(result: Phase) -> None:
    lost = result.count - result.completed
    print(
        f"N={result.count} concurrent runs in one worker process, {MODEL_LATENCY:g} s model, {STEPS} model calls each: "
        f"{result.completed} completed, {lost} lost ({result.failed} had a failed run first, redelivered), "
        f"{result.replied} replies posted; {result.seconds:.0f} s",
        flush=True,
    )
    verdict = "met" if result.kib_per_run <= MEMORY_TARGET_KIB else "MISSED"
    print(
        f"  worker RSS {result.idle_kib / 1024:.0f} MiB idle, {result.peak_kib / 1024:.0f} MiB at the peak: "
        f"{result.kib_per_run:.0f} KiB per active run (at most {result.most_running} at once, "
        f"{result.running_at_peak} at the peak; over all N: {(result.peak_kib - result.idle_kib) / result.count:.0f} "
        f"KiB); target <= {MEMORY_TARGET_KIB} KiB: {verdict}",
        flush=True,
    )
    print(
        f"  worker CPU {result.cpu_seconds:.1f} s for {result.model_calls} model calls: "
        f"{result.cpu_ms_per_step:.2f} ms per step, {result.cpu_seconds * 1000 / result.count:.0f} ms per run",
        flush=True,
    )
    framework = result.floor
    print(
        f"  floor, the framework alone holding {framework.count} runs at once (bench/floor_agent.py): RSS "
        f"{framework.idle_kib / 1024:.0f} MiB idle, {framework.peak_kib / 1024:.0f} MiB at the peak: "
        f"{framework.kib_per_run:.0f} KiB per active run, {framework.cpu_ms_per_step:.2f} ms of CPU per step "
        f"({framework.model_calls} model calls); the worker against it: "
        f"{result.kib_per_run / max(framework.kib_per_run, 1):.2f}x memory per active run, "
        f"{result.cpu_ms_per_step / max(framework.cpu_ms_per_step, 1e-9):.2f}x CPU per step",
        flush=True,
    )
    print(
        f"  worker idle, its {result.count} places waiting for wakes: "
        f"{result.idle_cpu_ms_per_s:.1f} ms of CPU per second",
        flush=True,
    )
    per_sandbox = result.sandbox_pss_kib / max(result.sandboxes, 1)
    holds = result.available_before_kib / per_sandbox if per_sandbox else 0
    print(
        f"  sandboxes: {result.sandboxes} daemons at the peak, {result.sandbox_pss_kib / 1024:.0f} MiB proportional "
        f"set size with their bwrap processes ({per_sandbox / 1024:.1f} MiB each); memory available before: "
        f"{result.available_before_kib / 1024:.0f} MiB, room for about {holds:.0f} such sandboxes",
        flush=True,
    )
    for name, counts, unit in (
        ("Valkey", result.traffic.commands, "commands (a script's own commands counted with it)"),
        ("JetStream", result.traffic.stored, "messages stored"),
    ):
        total = sum(counts.values())
        most = ", ".join(f"{key} {count}" for key, count in counts.most_common(6))
        print(
            f"  {name}: {total} {unit}: {total / max(result.count, 1):.1f} per run, "
            f"{total / max(result.model_calls, 1):.2f} per model call, "
            f"{total / max(result.run_seconds, 1e-9):.2f} per second of a run in progress "
            f"({result.run_seconds:.0f} run-seconds); most: {most}",
            flush=True,
        )


async def main() -> None:
    chosen = os.environ.get("BENCH_CONCURRENCY_COUNTS", "")
    counts = [int(count) for count in chosen.split(",") if count.strip()] or list(COUNTS)
    results = []
    for count in counts:
        with tempfile.TemporaryDirectory(prefix=f"bench-concurrency-{count}-") as scratch:
            result = await phase(Path(scratch), count)
        report(result)
        results.append(result)
    if len(results) > 1:
        first, last = results[0], results[-1]
        slope = (last.peak_kib - last.idle_kib - (first.peak_kib - first.idle_kib)) / (last.count - first.count)
        print(
            f"slope from N={first.count} to N={last.count}: {slope:.0f} KiB of worker RSS per further active run; "
            f"CPU per step {first.cpu_ms_per_step:.2f} -> {last.cpu_ms_per_step:.2f} ms "
            f"({last.cpu_ms_per_step / first.cpu_ms_per_step:.2f}x)",
            flush=True,
        )
