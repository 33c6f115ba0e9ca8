"""The autofix controller's decisions: latency per event, and events per second through one
controller process with nothing lost.

Embedded NATS and Valkey; GitHub is a canned responder (every agent pull request's head is the
agent's commit and fails ``tests``, which passes on ``main``), so GitHub's latency is excluded
or fixed, never measured. Two measurements:

- decision latency, in this process, one event at a time by kind: about a pull request the
  agent did not open (most CI traffic), a success, a failure already repaired, autofix off, and
  the first failure of a revision (GitHub asked four times, a repair request and wake
  published), with the canned GitHub answering at once over loopback;
- throughput: ``drydock serve autofix-controller`` as a process of its own (uvloop, JSON logs at
  INFO, as deployed), the canned GitHub in a third process, and 10,000 events on
  ``drydock.github.*`` from this one: at a fixed 1,000/s (open loop; latency from each event's
  due time, so queueing counts) with GitHub answering at once and in 20 ms, and as fast as they
  can be published. 60 % are about pull
  requests the agent did not open, 15 % successes, 25 % failures of 200 agent pull requests
  finishing CI one after another (about 12 jobs each, so 20 repairs a second). Every event must
  be acknowledged once and every failure on an agent pull request decided once; latency is
  measured on those decisions (the recorded ones).

Targets: decision p50 < 5 ms; 1,000 events/s with nothing lost.
Run: ``pdm run bench autofix`` (``BENCH_AUTOFIX_LOGS=DIR`` keeps the child processes' logs).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from redis.asyncio import Redis

from bench.canned_github import head_of
from bench.harness import Figures, report
from drydock.accounts import AccountsStore, RepositorySettings, UserProfile
from drydock.autofix.controller import AutofixController
from drydock.autofix.github import AutofixGithub
from drydock.bus import Bus, EventType, GithubEvent, ReplyAddress, RunEvent, connect_nats, provision, subjects, topology
from drydock.bus.envelopes import Channel
from drydock.bus.streams import AUTOFIX_CONSUMER, EVENTS_STREAM, GITHUB_STREAM
from drydock.config import load_settings
from drydock.embedded import embedded_infrastructure, free_port
from drydock.github import GithubClient
from drydock.infra.redis import Keys, connect_redis
from drydock.roles import Role
from drydock.threads.fields import OWNER, REPLY_TO, REPOSITORY
from drydock.threads.metadata import ThreadMetadataStore
from drydock.threads.pr_records import PullRequestRecord, PullRequestStore, branch_name
from tests.e2e.pipeline import settings_environment
from tests.fakes.github import webhooks

ORG, NAME = "acme", "widgets"
REPO = f"{ORG}/{NAME}"
AGENT_EMAIL = "drydock@users.noreply.github.com"
SAMPLES = 1000
EVENTS = 10_000
RATE = 1000.0
GITHUB_LATENCY = 0.020
P50_TARGET_MS = 5.0


async def _answering(url: str) -> None:
    """Wait until the canned GitHub at ``url`` answers."""
    async with httpx.AsyncClient() as client:
        for _ in range(1200):
            with contextlib.suppress(httpx.HTTPError):
                await client.get(f"{url}/repos/{REPO}/installation")
                return
            await asyncio.sleep(0.05)
    raise RuntimeError(f"the canned GitHub at {url} never answered")


def _private_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    ).decode()


class Repository:
    """Agent pull requests arranged as the coder leaves them (thread, PR record), autofix on or off."""

    def __init__(self, redis: Redis, keys: Keys, first: int) -> None:
        self.redis, self.keys = redis, keys
        self.numbers = itertools.count(first)

    async def agent_pull(self, *, enabled: bool = True) -> tuple[int, str, str]:
        """``(number, head, thread id)`` of a new agent pull request."""
        thread_id, number = str(uuid.uuid4()), next(self.numbers)
        owner = f"user-{'on' if enabled else 'off'}"
        reply_to = ReplyAddress(channel=Channel.GITHUB, address={"host": "github.com", "repository": REPO})
        await ThreadMetadataStore(self.redis, self.keys).create(
            thread_id, kind=Role.CODER, fields={OWNER: owner, REPLY_TO: reply_to.model_dump_json(), REPOSITORY: REPO}
        )
        record = PullRequestRecord("github.com", REPO, number, thread_id, branch_name(thread_id, "x"))
        await PullRequestStore(self.redis, self.keys).record(record)
        return number, head_of(number), thread_id


def check_run(number: int, head: str, conclusion: str = "failure", name: str = "tests") -> GithubEvent:
    payload = webhooks.check_run(
        ORG, NAME, conclusion=conclusion, head_sha=head, pull_numbers=(number,), check_name=name
    )
    return GithubEvent(
        delivery_id=str(uuid.uuid4()), event="check_run", action="completed", repository=REPO, payload=payload
    )


async def _timed(name: str, events: list[GithubEvent], handle: Callable[[GithubEvent], Awaitable[object]]) -> Figures:
    latencies = []
    started = time.perf_counter()
    for event in events:
        begin = time.perf_counter()
        await handle(event)
        latencies.append((time.perf_counter() - begin) * 1000)
    return Figures(name, len(events), time.perf_counter() - started, latencies)


async def decision_latency(controller: AutofixController, repository: Repository) -> None:
    repaired = [(await repository.agent_pull())[:2] for _ in range(50)]
    for number, head in repaired:
        await controller.handle(check_run(number, head))
    disabled = [(await repository.agent_pull(enabled=False))[:2] for _ in range(50)]
    fresh = [(await repository.agent_pull())[:2] for _ in range(SAMPLES)]
    kinds = {
        "not an agent pull request (ignored)": [check_run(900_000 + i, "f" * 40) for i in range(SAMPLES)],
        "a success (ignored)": [check_run(*random.choice(repaired), conclusion="success") for _ in range(SAMPLES)],
        "failure already repaired (skip)": [
            check_run(*random.choice(repaired), name=f"job-{i}") for i in range(SAMPLES)
        ],
        "autofix off (skip)": [check_run(*random.choice(disabled)) for _ in range(SAMPLES)],
        "first failure of a revision (dispatch)": [check_run(number, head) for number, head in fresh],
    }
    everything: list[float] = []
    for name, events in kinds.items():
        figures = await _timed(f"decide: {name}", events, controller.handle)
        report(figures)
        everything += figures.latencies_ms
    report(
        Figures("decide: all kinds above", len(everything), sum(everything) / 1000, everything),
        target_p50_ms=P50_TARGET_MS,
    )


def _mix(agent: list[tuple[int, str]], count: int, seed: str) -> list[GithubEvent]:
    """Most CI traffic is about pull requests the agent did not open; some is success. The agent's
    pull requests finish CI one after another over the run, each with a burst of failing jobs
    (the first failure of a revision is repaired, the rest skipped)."""
    chance = random.Random(seed)
    events = []
    for index in range(count):
        roll = chance.random()
        current = min(len(agent) - 1, max(0, int(index / count * len(agent)) + chance.randint(-2, 2)))
        if roll < 0.6:
            events.append(check_run(900_000 + index, "e" * 40))
        elif roll < 0.75:
            events.append(check_run(*chance.choice(agent), conclusion="success"))
        else:
            events.append(check_run(*agent[current], name=f"job-{index % 7}"))
    return events


async def throughput(bus: Bus, repository: Repository, *, rate: float | None, seed: str) -> None:
    """Publish the mix, wait until the controller acknowledged all of it, and check its decisions."""
    agent = [await repository.agent_pull() for _ in range(200)]
    threads = {thread_id for _, _, thread_id in agent}
    events = _mix([(number, head) for number, head, _ in agent], EVENTS, seed)
    on_agent_pulls = sum(
        1
        for event in events
        if event.payload["check_run"]["conclusion"] == "failure"
        and event.payload["check_run"]["pull_requests"][0]["number"] < 900_000
    )
    first = (await bus.js.stream_info(GITHUB_STREAM)).state.last_seq + 1
    due: dict[str, float] = {}
    slots = asyncio.Semaphore(64)
    started = time.time() + 0.2

    async def publish(index: int, event: GithubEvent) -> None:
        at = started + index / rate if rate else started
        await asyncio.sleep(max(0.0, at - time.time()))
        async with slots:
            due[event.delivery_id] = at if rate else time.time()
            await bus.github(event)

    await asyncio.gather(*(publish(index, event) for index, event in enumerate(events)))
    published = time.time()
    last = first + EVENTS - 1
    while True:
        consumer = await bus.js.consumer_info(GITHUB_STREAM, AUTOFIX_CONSUMER)
        if (consumer.ack_floor.stream_seq >= last and not consumer.num_ack_pending) or time.time() > published + 120:
            break
        await asyncio.sleep(0.01)
    seconds = time.time() - started
    decisions = await recorded_decisions(bus, threads)
    latencies = [(at - due[delivery]) * 1000 for delivery, at, _ in decisions if delivery in due]
    label = f"at {rate:,.0f} events/s" if rate else "as fast as published"
    report(
        Figures(f"controller process, {label}: decisions", len(latencies), seconds, latencies),
        target_p50_ms=P50_TARGET_MS,
    )
    acknowledged = consumer.ack_floor.stream_seq - first + 1
    print(
        f"    published {EVENTS:,} in {published - started:.2f} s; all acknowledged after {seconds:.2f} s "
        f"({acknowledged / seconds:,.0f} events/s); acknowledged {acknowledged:,}, redelivered "
        f"{consumer.num_redelivered}, lost {EVENTS - acknowledged}; failures on agent pull requests "
        f"{on_agent_pulls:,}, decisions recorded {len(decisions):,} (repairs dispatched "
        f"{sum(outcome == 'dispatch' for _, _, outcome in decisions)}, for {len(agent)} pull requests)",
        flush=True,
    )


async def recorded_decisions(bus: Bus, threads: set[str]) -> list[tuple[str, float, str]]:
    """``(delivery id, decided at, outcome)`` of every ``autofix`` decision recorded on ``threads``."""
    found: list[tuple[str, float, str]] = []
    subscription = await bus.js.subscribe(
        subjects.events_of_type(EventType.AUTOFIX.value), stream=EVENTS_STREAM, ordered_consumer=True
    )
    try:
        while True:
            try:
                message = await subscription.next_msg(timeout=1.0)
            except TimeoutError:
                return found
            event = RunEvent.model_validate_json(message.data)
            if event.thread_id in threads and event.data.get("delivery_id"):
                found.append((str(event.data["delivery_id"]), event.at.timestamp(), str(event.data["outcome"])))
    finally:
        await subscription.unsubscribe()


@contextlib.asynccontextmanager
async def process(*args: str, log: Path, environment: dict[str, str] | None = None) -> AsyncIterator[None]:
    """A child process for the enclosed block; stopped with SIGTERM."""
    with log.open("wb") as output:
        child = await asyncio.create_subprocess_exec(
            sys.executable, *args, env=environment, stdout=output, stderr=output
        )
    try:
        yield
    finally:
        child.send_signal(signal.SIGTERM)
        await child.wait()


async def main() -> None:
    async with embedded_infrastructure() as urls, contextlib.AsyncExitStack() as stack:
        settings = load_settings(
            nats={"url": urls.nats},
            redis={"url": urls.redis},
            github={"app_id": 1, "app_slug": "drydock", "private_key": _private_key(), "api_url": "http://github.test"},
        )
        nc = await connect_nats(settings.nats, name="bench")
        stack.push_async_callback(nc.close)
        redis = await connect_redis(settings.redis)
        stack.push_async_callback(redis.aclose)
        bus = Bus(nc)
        await provision(bus.js, topology(settings.nats))
        keys = Keys(settings.redis.key_prefix)
        accounts = AccountsStore(redis, keys, host="github.com")
        await accounts.save_repository(RepositorySettings(full_name=REPO, autofix=True))
        await accounts.save_profile(UserProfile(user_id="user-on", autofix=True))
        await accounts.save_profile(UserProfile(user_id="user-off", autofix=False))

        kept = os.environ.get("BENCH_AUTOFIX_LOGS")
        logs = Path(kept) if kept else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        instant, slow = free_port(), free_port()
        for port, latency in ((instant, 0.0), (slow, GITHUB_LATENCY)):
            github_process = ("-m", "bench.canned_github", str(port), str(latency))
            await stack.enter_async_context(process(*github_process, log=logs / f"github-{port}.log"))
        await _answering(f"http://127.0.0.1:{instant}")
        await _answering(f"http://127.0.0.1:{slow}")

        section = settings.github.model_copy(update={"api_url": f"http://127.0.0.1:{instant}"})
        client = GithubClient(section)
        stack.push_async_callback(client.aclose)
        github = AutofixGithub(client)
        in_process = AutofixController(settings, bus, redis, keys, github)
        await decision_latency(in_process, Repository(redis, keys, first=1))

        github_url = f"http://127.0.0.1:{slow}"
        overrides: dict[str, dict[str, Any]] = {
            "nats": {"url": urls.nats},
            "redis": {"url": urls.redis, "accept_ephemeral": True},
            "github": {"app_id": 1, "app_slug": "drydock", "private_key": _private_key(), "api_url": github_url},
            "autofix": {"monitor_interval": 3600},
            "crypto": {"keys": [Fernet.generate_key().decode()]},
        }
        environment = {key: value for key, value in os.environ.items() if not key.startswith("DRYDOCK_")}
        environment |= settings_environment(overrides)
        environment |= {"DRYDOCK_HTTP_HEALTH_LISTENER": "false", "DRYDOCK_ENVIRONMENT": "production"}
        serve = ("-m", "drydock", "serve", "autofix-controller")
        await stack.enter_async_context(process(*serve, log=logs / "controller.log", environment=environment))
        leading_by = time.monotonic() + 120
        while not await redis.exists(keys.autofix_leader()):
            if time.monotonic() > leading_by:
                raise SystemExit(f"the controller did not take the lead in 120 s: see {logs / 'controller.log'}")
            await asyncio.sleep(0.05)
        repository = Repository(redis, keys, first=100_000)
        async with httpx.AsyncClient(base_url=github_url) as control:
            for latency, rate, seed in (
                (0.0, RATE, "instant"),
                (GITHUB_LATENCY, RATE, "fixed"),
                (GITHUB_LATENCY, None, "burst"),
            ):
                await control.put(f"/_latency/{latency}")
                print(f"    GitHub answers in {latency * 1000:.0f} ms from a process of its own", flush=True)
                await throughput(bus, repository, rate=rate, seed=seed)


if __name__ == "__main__":
    asyncio.run(main())
