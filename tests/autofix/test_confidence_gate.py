"""The confidence gate of repair runs: while a thread's repair is active, the credential proxy
refuses its pushes until ``report_confidence`` recorded a confidence at or above the threshold.
Real git through the real proxy to a real ``git http-backend``."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from nats.aio.client import Client as NatsClient
from pydantic import SecretStr
from redis.asyncio import Redis

from drydock.autofix.policy import Kind
from drydock.autofix.repairs import Repair, Repairs
from drydock.bus import Bus, EventType, RunEvent
from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.bus.streams import EVENTS_STREAM
from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.credentials import ProxyCredentials
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.runtime import Runtime
from drydock.threads.scope import ThreadScope
from drydock.tools import build_tools
from drydock.tools.context import ToolContext
from services.credential_proxy.policy import confidence_denial, gate_applies
from services.credential_proxy.server import Listening, serving
from tests.autofix.conftest import REPO
from tests.credentials.sandbox_side import apply_grant, handle_for
from tests.fakes.git_server import GitError, GitServer, git
from tests.fakes.github import FakeGithub, Installation

CLONE_URL = f"https://github.com/{REPO}.git"


@pytest.fixture(scope="session")
async def git_upstream(
    github: FakeGithub, installation: Installation, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[GitServer]:
    async with GitServer(tmp_path_factory.mktemp("autofix-upstream"), authorize=github.git_access) as server:
        await server.create_repository(REPO, {"calc.py": b"def add(a, b):\n    return a - b\n"})
        yield server


@pytest.fixture
def gate_settings(autofix_settings: Settings, git_upstream: GitServer, tmp_path: Path) -> Settings:
    return autofix_settings.model_copy(
        update={
            "crypto": autofix_settings.crypto.model_copy(update={"keys": [SecretStr(Fernet.generate_key().decode())]}),
            "proxy": autofix_settings.proxy.model_copy(
                update={
                    "port": 0,
                    "egress_port": 0,
                    "git_upstream": git_upstream.base_url,
                    "socket_dir": str(tmp_path / "proxy"),
                }
            ),
        }
    )


@pytest.fixture
async def proxy(
    gate_settings: Settings, nats_client: NatsClient, bus: Bus, redis: Redis, keys: Keys
) -> AsyncIterator[tuple[Listening, ProxyCredentials]]:
    async with serving(Runtime(gate_settings, nats_client, bus, redis, keys)) as listening:
        section = gate_settings.proxy.model_copy(update={"url": listening.url, "egress_url": listening.egress_url})
        broker = ProxyCredentials.create(gate_settings.model_copy(update={"proxy": section}), redis, keys)
        yield listening, broker
        await broker.aclose()


async def open_repair(redis: Redis, keys: Keys, thread_id: str) -> Repair:
    repair = Repair(
        id="repair-1",
        thread_id=thread_id,
        host="github.com",
        repository=REPO,
        number=12,
        head_sha="a" * 40,
        kind=Kind.CI,
        threshold=0.7,
        dispatched_at=datetime.now(UTC),
    )
    await Repairs(redis, keys).open(repair, max_repairs=3, ttl=timedelta(minutes=5))
    return repair


async def report(
    settings: Settings, bus: Bus, redis: Redis, keys: Keys, thread_id: str, confidence: float
) -> dict[str, Any]:
    """Call ``report_confidence`` as a coder run of the thread does."""
    address = {"host": "github.com", "repository": REPO, "number": "7"}
    scope = ThreadScope(
        thread_id=thread_id,
        run_id="run-1",
        role=Role.CODER,
        repository=REPO,
        reply_to=ReplyAddress(channel=Channel.GITHUB, address=address),
    )
    async with httpx.AsyncClient() as http:
        context = ToolContext(scope, settings, bus, redis, keys, Outbound({}, {}, []), http)
        (tool,) = build_tools(["report_confidence"], context)
        result: dict[str, Any] = await tool.ainvoke({"confidence": confidence, "diagnosis": "add() subtracts"})
        return result


class TestConfidenceGate:
    async def test_a_repair_run_pushes_only_after_a_confidence_at_or_above_the_threshold(
        self,
        proxy: tuple[Listening, ProxyCredentials],
        gate_settings: Settings,
        git_upstream: GitServer,
        bus: Bus,
        redis: Redis,
        keys: Keys,
        tmp_path: Path,
        thread_id: str,
    ) -> None:
        _, broker = proxy
        grant = await broker.issue(
            handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=REPO
        )
        env = await apply_grant(grant, tmp_path)
        work = tmp_path / "widgets"
        await git("clone", "-q", CLONE_URL, str(work), env=env)
        (work / "calc.py").write_text("def add(a, b):\n    return a + b\n")
        await git("commit", "-qam", "Fix add()", cwd=work, env=env)
        branch = f"drydock/gate-{thread_id[:8]}"
        await open_repair(redis, keys, thread_id)

        with pytest.raises(GitError, match=re.escape("a push needs a confidence of at least 0.7 (none is recorded)")):
            await git("push", "-q", "origin", f"HEAD:refs/heads/{branch}", cwd=work, env=env)

        low = await report(gate_settings, bus, redis, keys, thread_id, 0.4)
        assert (low["may_push"], low["repair"]) == (False, "repair-1")
        assert "do not push" in low["note"]
        with pytest.raises(GitError, match=re.escape("(0.4 is recorded)")):
            await git("push", "-q", "origin", f"HEAD:refs/heads/{branch}", cwd=work, env=env)

        high = await report(gate_settings, bus, redis, keys, thread_id, 0.85)
        assert high["may_push"] is True
        await git("push", "-q", "origin", f"HEAD:refs/heads/{branch}", cwd=work, env=env)
        bare = git_upstream.repository_path(REPO)
        assert (await git("--git-dir", str(bare), "log", "-1", "--format=%s", branch, env=env)).strip() == "Fix add()"

        stored = await bus.js.get_last_msg(EVENTS_STREAM, f"drydock.event.{thread_id}.{EventType.PROXY_DENIED}")
        assert stored.data is not None
        denial = RunEvent.model_validate_json(stored.data)
        assert denial.data["reason"] == "confidence"

    async def test_without_an_active_repair_pushes_are_not_gated(
        self, proxy: tuple[Listening, ProxyCredentials], redis: Redis, keys: Keys, tmp_path: Path, thread_id: str
    ) -> None:
        _, broker = proxy
        grant = await broker.issue(
            handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=REPO
        )
        env = await apply_grant(grant, tmp_path)
        work = tmp_path / "widgets"
        await git("clone", "-q", CLONE_URL, str(work), env=env)
        (work / "notes.txt").write_text("no repair here\n")
        await git("add", "notes.txt", cwd=work, env=env)
        await git("commit", "-qm", "notes", cwd=work, env=env)
        repair = await open_repair(redis, keys, thread_id)
        await Repairs(redis, keys).finish(thread_id, repair.id)
        await git("push", "-q", "origin", f"HEAD:refs/heads/drydock/free-{thread_id[:8]}", cwd=work, env=env)

    async def test_api_writes_that_move_a_branch_are_gated_too(
        self, proxy: tuple[Listening, ProxyCredentials], redis: Redis, keys: Keys, tmp_path: Path, thread_id: str
    ) -> None:
        listening, broker = proxy
        grant = await broker.issue(
            handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=REPO
        )
        assert grant.token is not None
        await open_repair(redis, keys, thread_id)
        async with httpx.AsyncClient(base_url=f"{listening.url}/g/{grant.token}/api") as api:
            refused = await api.put(f"/repos/{REPO}/contents/calc.py", json={"message": "x", "content": ""})
            assert refused.status_code == 403
            assert "autofix repair" in refused.json()["message"]
            read = await api.get(f"/repos/{REPO}")
            assert read.status_code == 200


class TestPolicy:
    @pytest.mark.parametrize(
        ("method", "path", "gated"),
        [
            ("PUT", "repos/acme/widgets/contents/calc.py", True),
            ("PATCH", "repos/acme/widgets/git/refs/heads/x", True),
            ("POST", "repos/acme/widgets/git/commits", True),
            ("POST", "repos/acme/widgets/merges", True),
            ("PUT", "repos/acme/widgets/pulls/3/update-branch", True),
            ("PUT", "repos/acme/widgets/pulls/3/merge", True),
            ("POST", "repos/acme/widgets/branches/main/rename", True),
            ("POST", "graphql", True),
            ("PATCH", "repositories/1/git/refs/heads/main", True),
            ("POST", "repos/acme/widgets/issues/3%2Fcomments", True),
            ("GET", "repos/acme/widgets/contents/calc.py", False),
            ("POST", "repos/acme/widgets/issues/3/comments", False),
            ("PATCH", "repos/acme/widgets/pulls/3", False),
            ("POST", "repos/acme/widgets/check-runs", False),
        ],
    )
    def test_which_api_requests_wait(self, method: str, path: str, gated: bool) -> None:
        assert gate_applies(method, path) is gated

    def test_the_gate_opens_at_the_threshold(self) -> None:
        repair = Repair("r", "t", "github.com", REPO, 1, "a" * 40, Kind.CI, 0.7, datetime.now(UTC))
        assert confidence_denial(None) is None
        assert confidence_denial(repair) is not None
        assert confidence_denial(replace(repair, confidence=0.69)) is not None
        assert confidence_denial(replace(repair, confidence=0.7)) is None
