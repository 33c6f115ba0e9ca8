"""The whole pipeline on one machine, for the end-to-end tests and ``pdm run demo``: embedded
NATS and Valkey of its own, the real ingress, credential proxy and agent workers (the coder by
default; ``roles=`` picks others: the reviewer, the analyzer), local sandboxes, real git against
an upstream git server, and test doubles of GitHub, Slack, Linear and the model endpoint.

``async with pipeline(root, script) as stage:`` starts everything; ``stage.deliver_github(...)``
sends a signed webhook to the ingress like GitHub would; the worker runs the scripted model's
tool calls in a local sandbox. ``stage.start_worker_process()`` runs a coder worker as a
separate ``drydock serve coder-worker`` process (so a test can SIGKILL it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import httpx
from cryptography.fernet import Fernet

from drydock.accounts import AccountsStore, RepositorySettings, TeamDefaults
from drydock.bus import RunEvent, subjects
from drydock.bus.streams import EVENTS_STREAM
from drydock.channels.outbound import Outbound
from drydock.config import Settings, load_settings
from drydock.dev import service_settings
from drydock.embedded import EmbeddedServer, embedded_infrastructure
from drydock.http import create_app
from drydock.infra.server_keys import ServerKeys
from drydock.roles import Role
from drydock.runtime import Runtime, open_runtime
from drydock.sandbox.providers import create_provider
from drydock.sandbox.records import SandboxStore
from drydock.threads import Inbox
from drydock.threads.pr_records import PullRequestStore
from drydock.worker.agent_worker import agent_worker
from drydock.worker.role_spec import RoleSpec
from drydock.worker.roles import analyzer, coder, reviewer
from services.autofix_controller.serving import controller_service
from services.credential_proxy.server import serving
from services.ingress.app import router as ingress_routes
from tests.e2e.dashboard import dashboard_section, serving_dashboard
from tests.fakes import signing
from tests.fakes.git_server import GitServer
from tests.fakes.github import App, FakeGithub, Installation
from tests.fakes.github.activity import activity_of
from tests.fakes.linear import FakeLinear
from tests.fakes.loopback import LoopbackServer
from tests.fakes.openai_server import Responder, Script, ScriptedModelServer
from tests.fakes.slack import FakeSlack
from tests.waiting import eventually

GITHUB_SECRET = "e2e-github-secret"
SLACK_SECRET = "e2e-slack-secret"
LINEAR_SECRET = "e2e-linear-secret"
ORG = "acme"
REPOSITORY = "acme/widgets"
MEMBER = "octocat"
MODEL = "gpt-5.1"
PERMISSIONS = {
    "contents": "write",
    "metadata": "read",
    "pull_requests": "write",
    "issues": "write",
    "checks": "write",
    "members": "read",
}

REPOSITORY_FILES: dict[str, bytes] = {
    "README.md": b"# widgets\n\nSmall arithmetic helpers.\n",
    "AGENTS.md": b"# Agents\n\nRun the tests with `python3 -m unittest -q` before committing.\n",
    "calc.py": b"def add(a, b):\n    return a - b\n",
    "test_calc.py": (
        b"import unittest\n\nfrom calc import add\n\n\n"
        b"class AddTest(unittest.TestCase):\n"
        b"    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\n"
        b"if __name__ == '__main__':\n    unittest.main()\n"
    ),
}

T = TypeVar("T")

WORKERS: dict[Role, RoleSpec] = {Role.CODER: coder.SPEC, Role.REVIEWER: reviewer.SPEC, Role.ANALYZER: analyzer.SPEC}
"""The spec of each worker the pipeline can run in process (``roles=``)."""


def _env_value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, list | dict) else str(value)


def settings_environment(overrides: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The ``DRYDOCK_*`` variables that configure a separate process like ``overrides``."""
    return {
        f"DRYDOCK_{section}_{name}".upper(): _env_value(value)
        for section, values in overrides.items()
        for name, value in values.items()
        if value is not None
    }


@dataclass
class Stage:
    """The running pipeline and what a test needs to drive and observe it."""

    settings: Settings
    overrides: dict[str, dict[str, Any]]
    runtime: Runtime
    github: FakeGithub
    app: App
    installation: Installation
    git: GitServer
    slack: FakeSlack
    linear: FakeLinear
    model: ScriptedModelServer
    ingress: httpx.AsyncClient
    root: Path
    processes: list[asyncio.subprocess.Process] = field(default_factory=list)
    dashboard_url: str | None = None
    worker_nats: dict[str, str] = field(default_factory=dict, repr=False)
    """The environment that gives a worker process the coder worker's NATS user."""
    servers: Mapping[str, EmbeddedServer] = field(default_factory=dict, repr=False)
    nats_passwords: Mapping[str, str] = field(default_factory=dict, repr=False)
    """The embedded NATS and Valkey (``nats``, ``valkey``), which a test may stop and start again."""

    @property
    def accounts(self) -> AccountsStore:
        return AccountsStore(self.runtime.redis, self.runtime.keys, host=self.settings.github.host)

    @property
    def records(self) -> PullRequestStore:
        return PullRequestStore(self.runtime.redis, self.runtime.keys)

    async def deliver_github(self, event: str, payload: dict[str, Any]) -> httpx.Response:
        request = signing.github(GITHUB_SECRET, event, payload)
        return await self.ingress.post(request.path, content=request.body, headers=request.headers)

    async def deliver_slack(self, payload: dict[str, Any]) -> httpx.Response:
        request = signing.slack_event(SLACK_SECRET, payload)
        return await self.ingress.post(request.path, content=request.body, headers=request.headers)

    async def deliver_linear(self, payload: dict[str, Any]) -> httpx.Response:
        request = signing.linear(LINEAR_SECRET, payload)
        return await self.ingress.post(request.path, content=request.body, headers=request.headers)

    async def events(self, thread_id: str) -> list[RunEvent]:
        """Every run event of the thread so far, oldest first."""
        found: list[RunEvent] = []
        wanted = subjects.events_of(thread_id)
        # Counted on the stream: a push consumer's num_pending leaves out what it already delivered.
        stored = (await self.runtime.bus.js.stream_info(EVENTS_STREAM, subjects_filter=wanted)).state.subjects or {}
        subscription = await self.runtime.bus.js.subscribe(wanted, stream=EVENTS_STREAM, ordered_consumer=True)
        try:
            for _ in range(sum(stored.values())):
                message = await subscription.next_msg(timeout=5)
                found.append(RunEvent.model_validate_json(message.data))
        finally:
            await subscription.unsubscribe()
        return found

    async def released(self, thread_id: str) -> None:
        """Wait until the worker lets go of the thread: after the turn's snapshot and the
        checkpoints' compaction, which follow the run's end event (a test that reads the
        sandbox's files while the snapshot is written sees its temporary files come and go)."""

        async def free() -> bool:
            return not await self.runtime.redis.exists(self.runtime.keys.lease(thread_id))

        await eventually(free, within=60, what=f"the worker to release thread {thread_id}")

    async def inbox_size(self, thread_id: str) -> int:
        return len(await Inbox(self.runtime.bus).read_after(thread_id))

    async def start_worker_process(self, *, name: str = "worker") -> asyncio.subprocess.Process:
        """``drydock serve coder-worker`` as a separate process on this pipeline."""
        return await self.start_service_process(
            "coder-worker", name=name, environment=self.worker_nats | {"DRYDOCK_HTTP_HEALTH_LISTENER": "false"}
        )

    def nats_user(self, user: str) -> dict[str, str]:
        """The environment that gives a separate process the NATS user ``user`` (a service's name)."""
        return self.worker_nats | {"DRYDOCK_NATS_USER": user, "DRYDOCK_NATS_PASSWORD": self.nats_passwords[user]}

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """A separate process's environment on this pipeline's settings: this process's own
        variables without its ``DRYDOCK_*`` ones, the pipeline's settings, then ``extra``."""
        own = {key: value for key, value in os.environ.items() if not key.startswith("DRYDOCK_")}
        return own | settings_environment(self.overrides) | dict(extra or {})

    async def start_service_process(
        self, service: str, *, name: str, environment: Mapping[str, str]
    ) -> asyncio.subprocess.Process:
        """``drydock serve SERVICE`` as a separate process on this pipeline's settings, plus
        ``environment`` (its NATS user, its port), logging to ``root/NAME.log``."""
        log = (self.root / f"{name}.log").open("ab")
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "drydock", "serve", service, env=self.environment(environment), stdout=log, stderr=log
        )
        log.close()
        self.processes.append(process)
        return process


@contextlib.asynccontextmanager
async def pipeline(
    root: Path,
    script: Script | None = None,
    *,
    scripts: Mapping[str, Script] | None = None,
    responder: Responder | None = None,
    model_latency: float = 0.0,
    in_process_worker: bool = True,
    roles: tuple[Role, ...] = (Role.CODER,),
    model_configured: bool = True,
    dashboard: bool = False,
    autofix_controller: bool = False,
    store: Path | None = None,
    **sections: dict[str, Any],
) -> AsyncIterator[Stage]:
    """Start everything under ``root``; ``sections`` override settings (``worker={...}``);
    ``dashboard`` serves the dashboard too, at ``stage.dashboard_url``; ``autofix_controller`` runs
    the autofix controller (and with it the scheduler); ``store`` keeps the embedded servers' data
    there (Valkey appending to a file), so ``stage.servers`` restart with it."""
    async with contextlib.AsyncExitStack() as stack:
        urls = await stack.enter_async_context(embedded_infrastructure(workdir=store))
        github = await stack.enter_async_context(FakeGithub())
        app = github.create_app("drydock")
        installation = github.install(app, ORG, ["widgets"], permissions=PERMISSIONS)
        activity_of(github.state).add_member(ORG, MEMBER)
        git = await stack.enter_async_context(GitServer(root / "upstream", authorize=github.git_access))
        await git.create_repository(REPOSITORY, REPOSITORY_FILES)
        slack = await stack.enter_async_context(FakeSlack())
        linear = await stack.enter_async_context(FakeLinear())
        model = await stack.enter_async_context(
            ScriptedModelServer(script, scripts=scripts, responder=responder, latency=model_latency)
        )
        overrides: dict[str, dict[str, Any]] = {
            "redis": {"url": urls.redis},
            "github": {
                "api_url": github.base_url,
                "app_id": app.id,
                "app_slug": app.slug,
                "private_key": app.private_key_pem,
                "webhook_secret": GITHUB_SECRET,
            },
            "slack": {"api_url": slack.api_url, "bot_token": slack.state.token, "signing_secret": SLACK_SECRET},
            "linear": {"api_url": linear.api_url, "api_key": linear.state.api_key, "webhook_secret": LINEAR_SECRET},
            "crypto": {"keys": [Fernet.generate_key().decode()]},
            "proxy": {"port": 0, "egress_port": 0, "git_upstream": git.base_url, "socket_dir": str(root / "proxy")},
            "models": {"base_url": model.base_url, "api_key": "e2e-key", "default": MODEL, "max_retries": 0}
            if model_configured
            else {},
            "sandbox": {"local_root": str(root / "sandboxes")},
            "worker": {"heartbeat": 1},
            "lease": {"ttl": 5},
            "nats": {"url": urls.nats, "run_ack_wait": 10},
        }
        if dashboard:
            overrides["dashboard"] = dashboard_section(github, app)
        for name, values in sections.items():
            overrides[name] = {**overrides.get(name, {}), **values}
        settings = load_settings(**overrides)
        runtime = await stack.enter_async_context(open_runtime(settings, name="e2e"))
        connections: dict[str, Runtime] = {}

        async def no_permission_was_missing() -> None:
            for name, connection in connections.items():
                error = str(connection.nats.last_error or "")
                if "permissions violation" in error.lower():
                    raise AssertionError(f"NATS user {name} lacks a permission it used: {error}")

        # Registered before the connections open, so it runs after every service stopped.
        stack.push_async_callback(no_permission_was_missing)

        async def as_service(name: str) -> Runtime:
            """``runtime`` on a NATS connection of the service's own user, with its permissions."""
            if name not in connections:
                connections[name] = await stack.enter_async_context(
                    open_runtime(service_settings(settings, urls, name), name=name)
                )
            own_nats = connections[name].settings.nats
            return replace(connections[name], settings=runtime.settings.model_copy(update={"nats": own_nats}))

        # Runs after the workers have stopped: local sandbox daemons outlive the process that
        # started them (a worker crash must not lose a sandbox), so the stage stops them.
        stack.push_async_callback(_delete_sandboxes, runtime)
        listening = await stack.enter_async_context(serving(await as_service("credential-proxy")))
        overrides["proxy"] |= {"url": listening.url, "egress_url": listening.egress_url}
        settings = load_settings(**overrides)
        runtime = replace(runtime, settings=settings)
        accounts = AccountsStore(runtime.redis, runtime.keys, host=settings.github.host)
        await accounts.save_team(TeamDefaults(allowed_organizations=(ORG,), default_repository=REPOSITORY))
        await accounts.save_repository(RepositorySettings(full_name=REPOSITORY, reviewer=False))

        ingress_runtime = await as_service("ingress")
        server = await stack.enter_async_context(
            LoopbackServer(create_app("ingress", ingress_runtime, [ingress_routes]), lifespan=True)
        )
        client = await stack.enter_async_context(httpx.AsyncClient(base_url=server.base_url, timeout=30))
        stage = Stage(settings, overrides, runtime, github, app, installation, git, slack, linear, model, client, root)
        stage.servers = urls.servers
        stage.nats_passwords = urls.nats_passwords
        stage.worker_nats = {
            "DRYDOCK_NATS_URL": str(urls.nats_address),
            "DRYDOCK_NATS_USER": "coder-worker",
            "DRYDOCK_NATS_PASSWORD": urls.nats_passwords["coder-worker"],
            "DRYDOCK_NATS_PROVISION": "false",
        }
        stack.push_async_callback(_stop_processes, stage)
        if dashboard:
            stage.dashboard_url = await stack.enter_async_context(serving_dashboard(await as_service("dashboard")))
        if in_process_worker:
            outbound = Outbound.from_settings(settings)
            stack.push_async_callback(outbound.aclose)
            for role in roles:
                worker = await stack.enter_async_context(
                    agent_worker(await as_service(f"{role.value}-worker"), WORKERS[role], outbound=outbound)
                )
                task = asyncio.create_task(worker.run(), name=f"{role.value}-worker")
                stack.push_async_callback(_cancel, task)
        if autofix_controller:
            controller = await stack.enter_async_context(
                controller_service(await as_service("autofix-controller"), owner="e2e-autofix")
            )
            stack.push_async_callback(_cancel, asyncio.create_task(controller.run(), name="autofix-controller"))
        yield stage


def sandbox_processes(root: Path) -> list[int]:
    """The pids of every process whose command line names ``root`` (the sandbox daemons under it
    and what they run)."""
    marker = str(root).encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if marker in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
            except OSError:
                continue
    return found


async def _delete_sandboxes(runtime: Runtime) -> None:
    provider = create_provider(
        runtime.settings, SandboxStore(runtime.redis, runtime.keys, ServerKeys.from_settings(runtime.settings.crypto))
    )
    try:
        await asyncio.gather(*(provider.delete(handle.id) for handle in await provider.list()))
    finally:
        await provider.aclose()


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _stop_processes(stage: Stage) -> None:
    for process in stage.processes:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
    for process in stage.processes:
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()
