"""The whole path on real pods: Drydock installed with Helm on a cluster (``KUBECONFIG``), with the
GitHub double, a git server speaking real git over HTTP, and the scripted model double running
on this machine, bound to the address the pods reach it at (``DRYDOCK_IT_HOST_ADDRESS``; on the
k8s lab the pod bridge's gateway, 10.244.77.1).

``async with cluster_stage(root) as stage:`` starts the doubles, installs a fresh release
(``integration.cluster.release``) whose services talk to them (lab values plus the doubles' URLs,
a one-pod warm pool, short leases so that a killed worker's run is taken over in seconds), enables
the repository, and yields a :class:`ClusterStage`: ``stage.deliver_github(...)`` sends a signed
webhook to the ingress Service's ClusterIP; ``stage.conversations.add(marker, script)`` scripts
the model for the conversation whose messages carry ``marker``; ``stage.events(thread)`` reads the
thread's run events from NATS as the provisioner user. The release is removed at the end
(``DRYDOCK_IT_KEEP=1`` keeps it for a look).

On the lab, ``python -m integration.cluster.lab_network`` must run beside it (Services, DNS, the
API server from pods), and the images must be loaded (README, "Drydock on a real cluster").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from drydock.accounts import AccountsStore, RepositorySettings, TeamDefaults
from drydock.bus import EventType, RunEvent, subjects
from drydock.bus.permissions import PROVISIONER
from drydock.bus.streams import EVENTS_STREAM
from drydock.config import load_settings
from drydock.embedded import REDIS_USER
from drydock.runtime import Runtime, open_runtime
from drydock.threads.metadata import ThreadMetadataStore
from integration.cluster.release import ClusterUnavailable, Release, chart_for_cluster, helm_binary, kubectl
from tests.fakes import signing
from tests.fakes.git_server import GitServer
from tests.fakes.github import App, FakeGithub, Installation, webhooks
from tests.fakes.github.activity import activity_of
from tests.fakes.openai_server import ReceivedRequest, Script, ScriptedModelServer

HOST_ADDRESS = os.environ.get("DRYDOCK_IT_HOST_ADDRESS", "10.244.77.1")
"""Where pods reach this machine: the k8s lab's bridge gateway unless set."""
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
WORKER_DEPLOYMENT = "coder-worker"
T = TypeVar("T")


def host_address_available(address: str = HOST_ADDRESS) -> None:
    """Raise :class:`ClusterUnavailable` unless ``address`` belongs to this machine."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, 0))
        except OSError as error:
            raise ClusterUnavailable(
                f"{address} is not an address of this machine ({error.strerror}): set DRYDOCK_IT_HOST_ADDRESS "
                "to where the cluster's pods reach it (on the k8s lab the bridge gateway appears with the first pod)"
            ) from None


class Conversations:
    """The model double's answers, per conversation: a coder conversation is the one whose user
    messages carry a script's marker; the reviewer's requests (its tools include
    ``publish_review``) read :attr:`review`."""

    def __init__(self) -> None:
        self.scripts: dict[str, Script] = {}
        self.review = Script()

    def add(self, marker: str, script: Script) -> None:
        self.scripts[marker] = script

    def respond(self, request: ReceivedRequest) -> Script | None:
        if "publish_review" in request.tool_names:
            return self.review
        text = "\n".join(request.texts("user"))
        return next((script for marker, script in self.scripts.items() if marker in text), None)


@dataclass
class ClusterStage:
    """The running release and the doubles it talks to."""

    release: Release
    github: FakeGithub
    app: App
    installation: Installation
    git: GitServer
    model: ScriptedModelServer
    conversations: Conversations
    runtime: Runtime
    ingress: httpx.AsyncClient
    root: Path
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def accounts(self) -> AccountsStore:
        return AccountsStore(self.runtime.redis, self.runtime.keys, host="github.com")

    @property
    def metadata(self) -> ThreadMetadataStore:
        return ThreadMetadataStore(self.runtime.redis, self.runtime.keys)

    async def deliver_github(self, event: str, payload: dict[str, Any]) -> httpx.Response:
        """A webhook signed with the release's secret, POSTed to the ingress Service."""
        request = signing.github(self.release.webhook_secret, event, payload)
        return await self.ingress.post(request.path, content=request.body, headers=request.headers)

    def mention(self, number: int, body: str) -> dict[str, Any]:
        """An issue comment by an organization member, as it exists on GitHub and as its webhook."""
        comment = activity_of(self.github.state).add_comment(REPOSITORY, number, body, login=MEMBER)
        return webhooks.issue_comment(
            ORG,
            "widgets",
            number,
            body,
            author=webhooks.user(MEMBER),
            comment_id=comment.id,
            installation_id=self.installation.id,
        )

    def requests_of(self, marker: str) -> list[ReceivedRequest]:
        """The model requests of the coder conversation carrying ``marker``."""
        return [
            request
            for request in self.model.requests
            if "publish_review" not in request.tool_names and marker in "\n".join(request.texts("user"))
        ]

    async def events(self, thread_id: str) -> list[RunEvent]:
        """Every run event of the thread so far, oldest first."""
        found: list[RunEvent] = []
        wanted = subjects.events_of(thread_id)
        js = self.runtime.bus.js
        stored = (await js.stream_info(EVENTS_STREAM, subjects_filter=wanted)).state.subjects or {}
        subscription = await js.subscribe(wanted, stream=EVENTS_STREAM, ordered_consumer=True)
        try:
            for _ in range(sum(stored.values())):
                message = await subscription.next_msg(timeout=10)
                found.append(RunEvent.model_validate_json(message.data))
        finally:
            await subscription.unsubscribe()
        return found

    async def completed(self, thread_id: str, runs: int = 1) -> bool:
        events = await self.events(thread_id)
        return sum(event.type is EventType.COMPLETED and not event.data.get("skipped") for event in events) >= runs

    async def sandbox_id(self, thread_id: str) -> str | None:
        return (await self.metadata.get(thread_id)).sandbox_id

    def sandbox_pods(self, selector: str = "") -> list[dict[str, Any]]:
        """The pods in the sandbox namespace (matching the label ``selector``)."""
        argv = ["-n", self.release.sandbox_namespace, "get", "pods", "-o", "json"]
        if selector:
            argv += ["-l", selector]
        return list(json.loads(kubectl(*argv))["items"])

    def service_pods(self, component: str) -> list[dict[str, Any]]:
        """The release's pods of one service (``coder-worker``, ...), the terminating ones included."""
        selector = f"app.kubernetes.io/instance={self.release.name},app.kubernetes.io/component={component}"
        return list(
            json.loads(kubectl("-n", self.release.namespace, "get", "pods", "-l", selector, "-o", "json"))["items"]
        )

    def logs(self, component: str) -> str:
        """The current logs of every pod of one service."""
        selector = f"app.kubernetes.io/instance={self.release.name},app.kubernetes.io/component={component}"
        return kubectl(
            "-n", self.release.namespace, "logs", "-l", selector, "--tail=-1", "--all-containers", check=False
        )


def _values(github: FakeGithub, app: App, git: GitServer, model: ScriptedModelServer) -> dict[str, Any]:
    """What this scenario sets on top of the dev and lab values: the doubles' URLs, a warm pool
    of one pod, short leases and ack waits (a killed worker's run is taken over in seconds, not a
    minute), and no automatic guideline analysis (the analyzer is not part of the path)."""
    return {
        "env": {
            "DRYDOCK_GITHUB_API_URL": github.base_url,
            "DRYDOCK_GITHUB_APP_ID": str(app.id),
            "DRYDOCK_GITHUB_APP_SLUG": app.slug,
            "DRYDOCK_MODELS_BASE_URL": model.base_url,
            "DRYDOCK_MODELS_DEFAULT": MODEL,
            "DRYDOCK_MODELS_MAX_RETRIES": "0",
            "DRYDOCK_LEASE_TTL": "10",
            "DRYDOCK_WORKER_HEARTBEAT": "2",
            "DRYDOCK_NATS_RUN_ACK_WAIT": "20",
            "DRYDOCK_REVIEW_AUTO_BOOTSTRAP": "false",
        },
        "services": {"credential-proxy": {"env": {"DRYDOCK_PROXY_GIT_UPSTREAM": git.base_url}}},
        "sandbox": {"warmPool": {"size": 1}},
    }


@contextlib.asynccontextmanager
async def cluster_stage(root: Path, release: Release) -> AsyncIterator[ClusterStage]:
    """Start the doubles, install ``release`` from a fresh start against them, yield the stage;
    uninstall at the end. Raises :class:`ClusterUnavailable` (a reason to skip) when there is no
    cluster, no helm, or the pods' address of this machine is missing."""
    helm = helm_binary()
    host_address_available()
    conversations = Conversations()
    async with contextlib.AsyncExitStack() as stack:
        github = await stack.enter_async_context(FakeGithub(host=HOST_ADDRESS))
        app = github.create_app("drydock")
        installation = github.install(app, ORG, ["widgets"], permissions=PERMISSIONS)
        activity_of(github.state).add_member(ORG, MEMBER)
        git = await stack.enter_async_context(
            GitServer(root / "upstream", authorize=github.git_access, host=HOST_ADDRESS)
        )
        await git.create_repository(REPOSITORY, REPOSITORY_FILES)
        model = await stack.enter_async_context(ScriptedModelServer(responder=conversations.respond, host=HOST_ADDRESS))
        values = root / "whole-path-values.yaml"
        values.write_text(json.dumps(_values(github, app, git, model), indent=2))  # JSON is YAML
        if os.environ.get("DRYDOCK_IT_KEEP") != "1":
            stack.callback(release.uninstall, helm)
        started = time.monotonic()
        await asyncio.to_thread(
            release.install,
            helm,
            chart_for_cluster(root),
            secret={"github-app-private-key": app.private_key_pem},
            values=[values],
        )
        installed = time.monotonic() - started
        nats = release.cluster_ip("nats", release.infra_namespace)
        valkey = release.cluster_ip("valkey", release.infra_namespace)
        settings = load_settings(
            nats={
                "url": f"nats://{nats}:4222",
                "user": PROVISIONER,
                "password": release.nats_passwords[PROVISIONER],
                "provision": False,
            },
            redis={"url": f"redis://{valkey}:6379/0", "username": REDIS_USER, "password": release.redis_password},
        )
        runtime = await stack.enter_async_context(open_runtime(settings, name="whole-path"))
        accounts = AccountsStore(runtime.redis, runtime.keys, host="github.com")
        await accounts.save_team(TeamDefaults(allowed_organizations=(ORG,), default_repository=REPOSITORY))
        await accounts.save_repository(RepositorySettings(full_name=REPOSITORY, reviewer=False))
        ingress = await stack.enter_async_context(
            httpx.AsyncClient(base_url=f"http://{release.cluster_ip(f'{release.name}-ingress')}:8000", timeout=30)
        )
        stage = ClusterStage(release, github, app, installation, git, model, conversations, runtime, ingress, root)
        stage.timings["install"] = installed
        yield stage
