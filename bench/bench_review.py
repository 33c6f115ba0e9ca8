"""A review of a 2,000-line diff (20 files of 100 added lines, 60 findings, 48 of them at or
above the severity threshold posted inline) against the embedded NATS and Valkey and the fake GitHub on loopback:

1. the review pipeline without the model: read the pull request and its files from GitHub,
   map the diff's commentable lines, record the 60 findings through ``add_finding`` (anchoring
   and fingerprint checks included), publish one review with ``publish_review``
   (target: whole review < 2 s);
2. the same review driven by the reviewer graph (real middleware and Redis checkpoints) with
   an instant scripted model that records the findings ten per model call: the whole turn,
   model round trips included (they cost almost nothing here).

Run: ``pdm run bench review``.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import httpx
from deepagents.backends import FilesystemBackend

from bench.harness import Figures, report
from drydock.bus import Bus, connect_nats, provision, topology
from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.channels.outbound import Outbound
from drydock.checkpoints import open_checkpointer
from drydock.config import Settings, load_settings
from drydock.credentials.user_tokens import app_authorization
from drydock.embedded import embedded_infrastructure
from drydock.graphs.inputs import AgentInputs
from drydock.graphs.reviewer import reviewer_graph, reviewer_run
from drydock.infra.redis import Keys, connect_redis
from drydock.middleware import RunLimits
from drydock.models import Models
from drydock.review.checkouts import ReviewCheckout
from drydock.review.target import ReviewTargets, fetch_target
from drydock.roles import Role
from drydock.sandbox.failures import SandboxFailures
from drydock.threads import Inbox
from drydock.threads.scope import ThreadScope
from drydock.tools import build_tools
from drydock.tools.context import ToolContext
from drydock.worker.roles.reviewer import TOOLS as REVIEWER_TOOLS
from tests.fakes.github import FakeGithub, webhooks
from tests.fakes.github.activity import activity_of
from tests.fakes.github.reviews import PullFile, reviews_of, set_files
from tests.fakes.github.state import PullRequest
from tests.fakes.openai_server import Script, ScriptedModelServer

REPOSITORY = "acme/widgets"
FILES = 20
LINES_PER_FILE = 100
HUNKS_PER_FILE = 4
FINDINGS_PER_FILE = 3
ROUNDS = 5
TARGET_MS = 2000.0
POSTED = 48
"""The findings at or above the default threshold (low); the 12 of severity info are held back."""


def _patch(file: int) -> str:
    """100 added lines in 4 hunks of 25, each between 2 context lines."""
    lines: list[str] = []
    per_hunk = LINES_PER_FILE // HUNKS_PER_FILE
    for hunk in range(HUNKS_PER_FILE):
        old = 1 + hunk * 40
        new = old + hunk * per_hunk
        lines.append(f"@@ -{old},2 +{new},{per_hunk + 2} @@")
        lines.append(f" context_{file}_{hunk}_a = 1")
        lines += [f"+value_{file}_{hunk}_{n} = compute({n}) / divisor" for n in range(per_hunk)]
        lines.append(f" context_{file}_{hunk}_b = 2")
    return "\n".join(lines)


def _findings() -> list[dict[str, Any]]:
    found = []
    severities = ["critical", "high", "medium", "low", "info"]
    for file in range(FILES):
        for n in range(FINDINGS_PER_FILE):
            hunk = n % HUNKS_PER_FILE
            first = 1 + hunk * 40 + hunk * (LINES_PER_FILE // HUNKS_PER_FILE) + 2 + n
            found.append(
                {
                    "severity": severities[(file + n) % len(severities)],
                    "confidence": 0.5 + n / 10,
                    "category": "correctness",
                    "title": f"Unchecked divisor in module {file} ({n})",
                    "path": f"src/module_{file}.py",
                    "start_line": first,
                    "end_line": first + (n % 3),
                    "description": "The divisor may be zero; guard it or document why it cannot be.",
                    "suggestion": "value = compute(n) / divisor if divisor else 0" if n == 0 else None,
                }
            )
    return found


@dataclass
class World:
    settings: Settings
    bus: Bus
    redis: Any
    github: FakeGithub
    outbound: Outbound
    http: httpx.AsyncClient
    number: int = 0

    def open_pull(self) -> int:
        """A new pull request with the 2,000-line diff."""
        state = self.github.state
        self.number += 1
        state.pulls[(REPOSITORY, self.number)] = PullRequest(
            id=state.next_id(), repository=REPOSITORY, number=self.number, title="Large change", body="",
            head_ref=f"feature-{self.number}", head_sha=uuid.uuid4().hex + "00000000", base_ref="main", draft=False,
            user=webhooks.user("octocat"),
        )  # fmt: skip
        activity_of(state).open_issue(REPOSITORY, self.number, pull_request=True)
        files = [PullFile(f"src/module_{n}.py", additions=LINES_PER_FILE, patch=_patch(n)) for n in range(FILES)]
        set_files(state, REPOSITORY, self.number, files)
        return self.number

    def context(self, thread_id: str, keys: Keys, number: int) -> ToolContext:
        reply_to = ReplyAddress(
            channel=Channel.GITHUB, address={"host": "github.com", "repository": REPOSITORY, "number": str(number)}
        )
        scope = ThreadScope(thread_id, uuid.uuid4().hex, Role.REVIEWER, REPOSITORY, reply_to)
        return ToolContext(scope, self.settings, self.bus, self.redis, keys, self.outbound, self.http)


@contextlib.asynccontextmanager
async def world(model_url: str) -> AsyncIterator[World]:
    async with contextlib.AsyncExitStack() as stack:
        urls = await stack.enter_async_context(embedded_infrastructure())
        github = await stack.enter_async_context(FakeGithub())
        app = github.create_app("drydock")
        github.install(app, "acme", ["widgets"])
        settings = load_settings(
            nats={"url": urls.nats},
            redis={"url": urls.redis},
            github={"api_url": github.base_url, "app_id": app.id, "private_key": app.private_key_pem},
            models={"base_url": model_url, "api_key": "bench", "default": "gpt-5.1", "max_retries": 0},
            review={"max_comments": 50},
        )
        nc = await connect_nats(settings.nats, name="bench")
        stack.push_async_callback(nc.close)
        await provision(nc.jetstream(), topology(settings.nats))
        redis = await connect_redis(settings.redis)
        stack.push_async_callback(redis.aclose)
        outbound = Outbound.from_settings(settings)
        stack.push_async_callback(outbound.aclose)
        http = await stack.enter_async_context(httpx.AsyncClient())
        yield World(settings, Bus(nc), redis, github, outbound, http)


async def _review_without_model(world: World, findings: list[dict[str, Any]]) -> dict[str, float]:
    """One review through the tools; the time of each stage in ms."""
    keys = Keys(prefix=f"bench-{uuid.uuid4().hex[:8]}")
    thread_id, number = str(uuid.uuid4()), world.open_pull()
    context = world.context(thread_id, keys, number)
    tools = {tool.name: tool for tool in build_tools(REVIEWER_TOOLS, context)}
    client = world.outbound.github
    assert client is not None
    stages: dict[str, float] = {}
    begin = time.perf_counter()
    target = await fetch_target(client, await app_authorization(client, REPOSITORY), REPOSITORY, number)
    await ReviewTargets(world.redis, keys).save(thread_id, target)
    stages["fetch"] = time.perf_counter() - begin
    mark = time.perf_counter()
    target.diff()
    stages["map"] = time.perf_counter() - mark
    mark = time.perf_counter()
    for finding in findings:
        answer = await tools["add_finding"].ainvoke({k: v for k, v in finding.items() if v is not None})
        assert answer["created"], answer
    stages["findings"] = time.perf_counter() - mark
    mark = time.perf_counter()
    published = await tools["publish_review"].ainvoke({"summary": "Many unchecked divisors."})
    assert len(published["posted"]) == POSTED, published
    stages["publish"] = time.perf_counter() - mark
    stages["total"] = time.perf_counter() - begin
    return {name: seconds * 1000 for name, seconds in stages.items()}


def _append_turn(script: Script, findings: list[dict[str, Any]]) -> None:
    """One reviewer turn's model answers: list, record the findings ten per call, publish."""
    script.tool_call("list_findings")
    for start in range(0, len(findings), 10):
        batch = [("add_finding", {k: v for k, v in f.items() if v is not None}) for f in findings[start : start + 10]]
        script.tool_calls(*batch)
    script.tool_call("publish_review", summary="Many unchecked divisors.").reply("Reviewed.")


async def _review_with_graph(world: World, findings: list[dict[str, Any]], model: ScriptedModelServer) -> float:
    """One reviewer turn through the graph with the instant model; its wall time in ms."""
    keys = Keys(prefix=f"bench-{uuid.uuid4().hex[:8]}")
    thread_id, number = str(uuid.uuid4()), world.open_pull()
    context = world.context(thread_id, keys, number)
    client = world.outbound.github
    assert client is not None
    models = Models(world.settings.models)
    resolved = models.resolve(thread=None, user=None, team=None)
    with tempfile.TemporaryDirectory() as root:
        async with open_checkpointer(world.settings.redis) as checkpointer:
            begin = time.perf_counter()
            target = await fetch_target(client, await app_authorization(client, REPOSITORY), REPOSITORY, number)
            await ReviewTargets(world.redis, keys).save(thread_id, target)
            inputs = AgentInputs(
                scope=context.scope,
                model=models.chat_model(resolved),
                fallback=None,
                backend=cast(Any, FilesystemBackend(root_dir=root, virtual_mode=True)),
                tools=build_tools(REVIEWER_TOOLS, context),
                checkpointer=checkpointer,
                inbox=Inbox(world.bus),
                sandbox_failures=SandboxFailures(world.redis, keys),
                status=None,
                notifier=None,
                checkout=ReviewCheckout(repository=REPOSITORY, path="/widgets", target=target),
                limits=RunLimits(),
            )
            config = {"configurable": {"thread_id": thread_id}, "recursion_limit": 1000}
            await reviewer_graph(inputs).ainvoke(
                {"messages": [("user", "Review it.")]}, cast(Any, config), context=reviewer_run(inputs)
            )
            elapsed = (time.perf_counter() - begin) * 1000
    posted = [r for r in reviews_of(world.github.state).reviews.values() if r.number == number]
    assert len(posted) == 1, "the graph published no review"
    return elapsed


async def main() -> None:
    findings = _findings()
    script = Script()
    for _ in range(ROUNDS + 1):
        _append_turn(script, findings)
    async with ScriptedModelServer(script) as model, world(model.base_url) as bench:
        lines = sum(LINES_PER_FILE for _ in range(FILES))
        print(f"diff: {FILES} files, {lines} added lines; {len(findings)} findings, {POSTED} posted inline", flush=True)
        await _review_without_model(bench, findings)
        samples = [await _review_without_model(bench, findings) for _ in range(ROUNDS)]
        for stage in ("fetch", "map", "findings", "publish"):
            values = [sample[stage] for sample in samples]
            report(Figures(f"review without the model: {stage}", ROUNDS, sum(values) / 1000, values))
        totals = [s["total"] for s in samples]
        report(
            Figures("review without the model: whole review", ROUNDS, sum(totals) / 1000, totals),
            target_p50_ms=TARGET_MS,
        )
        await _review_with_graph(bench, findings, model)
        turns = [await _review_with_graph(bench, findings, model) for _ in range(ROUNDS)]
        report(Figures("reviewer graph turn, instant model", ROUNDS, sum(turns) / 1000, turns))
