"""The owner's approvals at the credential proxy, tried as the agent's git pushes: from inside a
real bubblewrap sandbox (``aexecute`` on the backend ``ensure_sandbox`` gives a coder thread),
through the real proxy, to a real ``git http-backend``.

- Plan approval: pushes are refused until the thread's newest plan is approved by its owner; a
  revised plan is held again.
- Protected paths: a push changing ``.github/workflows/**`` is held until the owner approves
  that exact change; the retried push then goes through; another push is held anew."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from nats.aio.client import Client as NatsClient
from redis.asyncio import Redis

from drydock.accounts import AccountsStore
from drydock.accounts.records import RepositorySettings
from drydock.bus import Bus, EventType, RunEvent
from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.bus.streams import EVENTS_STREAM
from drydock.config import SandboxSettings, Settings, load_settings
from drydock.credentials import ProxyCredentials
from drydock.embedded import EmbeddedUrls
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.roles import Role
from drydock.runtime import Runtime
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.lifecycle import SandboxManager
from drydock.sandbox.providers.local import LocalProvider
from drydock.sandbox.records import SandboxStore
from drydock.threads.approvals import Approvals
from drydock.threads.metadata import ThreadMetadataStore
from services.credential_proxy.server import Listening, serving
from tests.fakes.git_server import GitServer, git, isolated_git_env
from tests.fakes.github import FakeGithub
from tests.fakes.github.activity import activity_of

pytestmark = pytest.mark.usefixtures("bwrap")

REPOSITORY = "acme/widgets"
OWNER = "user-owner"
WORKFLOW = ".github/workflows/ci.yml"


@pytest.fixture(scope="module")
async def github() -> AsyncIterator[FakeGithub]:
    async with FakeGithub() as fake:
        yield fake


@pytest.fixture(scope="module")
async def upstream(github: FakeGithub, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GitServer]:
    async with GitServer(tmp_path_factory.mktemp("upstream"), authorize=github.git_access) as server:
        await server.create_repository(REPOSITORY, {"README.md": b"# widgets\n", WORKFLOW: b"on: push\n"})
        yield server


@pytest.fixture
def crypto() -> list[str]:
    return [Fernet.generate_key().decode()]


@pytest.fixture
async def proxy(
    infra: EmbeddedUrls,
    github: FakeGithub,
    upstream: GitServer,
    crypto: list[str],
    tmp_path: Path,
    nats_client: NatsClient,
    bus: Bus,
    redis: Redis,
    keys: Keys,
) -> AsyncIterator[tuple[Settings, Listening]]:
    app = github.create_app()
    github.install(app, "acme", ["widgets"])
    overrides: dict[str, dict[str, Any]] = {
        "nats": {"url": infra.nats},
        "redis": {"url": infra.redis},
        "github": {"api_url": github.base_url, "app_id": app.id, "private_key": app.private_key_pem},
        "crypto": {"keys": crypto},
        "proxy": {
            "port": 0,
            "egress_port": 0,
            "git_upstream": upstream.base_url,
            "socket_dir": str(tmp_path / "proxy"),
            "mirror_dir": str(tmp_path / "mirrors"),
        },
    }
    settings = load_settings(**overrides)
    async with serving(Runtime(settings, nats_client, bus, redis, keys)) as listening:
        overrides["proxy"] |= {"url": listening.url, "egress_url": listening.egress_url}
        yield load_settings(**overrides), listening


@pytest.fixture
async def manager(
    proxy: tuple[Settings, Listening],
    sandbox_settings: SandboxSettings,
    records: SandboxStore,
    metadata: ThreadMetadataStore,
    redis: Redis,
    keys: Keys,
) -> AsyncIterator[SandboxManager]:
    settings, _ = proxy
    provider = LocalProvider(sandbox_settings, records, proxy=settings.proxy)
    credentials = ProxyCredentials.create(settings, redis, keys)
    manager = SandboxManager(
        provider=provider,
        records=records,
        metadata=metadata,
        credentials=credentials,
        redis=redis,
        keys=keys,
        settings=sandbox_settings,
    )
    yield manager
    await manager.aclose()
    for handle in await provider.list():
        await provider.delete(handle.id)
    await credentials.aclose()


@pytest.fixture
def approvals(redis: Redis, keys: Keys, crypto: list[str]) -> Approvals:
    """The approvals store as the dashboard and ingress hold it (the proxy's key)."""
    return Approvals(redis, keys, ServerKeys(crypto))


@pytest.fixture
def accounts(redis: Redis, keys: Keys) -> AccountsStore:
    return AccountsStore(redis, keys, host="github.com")


ISSUE = 7


@pytest.fixture
async def thread(metadata: ThreadMetadataStore, github: FakeGithub) -> str:
    """A coder thread started from issue #7 of the repository, owned by ``OWNER``."""
    activity_of(github.state).open_issue(REPOSITORY, ISSUE)
    reply_to = ReplyAddress(
        channel=Channel.GITHUB, address={"host": "github.com", "repository": REPOSITORY, "number": str(ISSUE)}
    )
    thread_id = str(uuid.uuid4())
    fields = {"repository": REPOSITORY, "owner": OWNER, "reply_to": reply_to.model_dump_json()}
    await metadata.create(thread_id, kind=Role.CODER, fields=fields)
    return thread_id


@pytest.fixture
async def sandbox(manager: SandboxManager, thread: str) -> SandboxBackend:
    sandbox = await manager.ensure_sandbox(thread)
    result = await sandbox.aexecute(f"git clone -q https://github.com/{REPOSITORY}.git widgets && echo cloned")
    assert result.exit_code == 0, result.output
    return sandbox


async def commit_and_push(sandbox: SandboxBackend, path: str, content: str, branch: str) -> tuple[int | None, str]:
    """Change ``path`` in the checkout, commit it and push it to ``branch``, as the agent would."""
    result = await sandbox.aexecute(
        f"cd widgets && mkdir -p $(dirname {path}) && printf '{content}' > {path} && git add -A && "
        f"git commit -qm 'change {path}' && git push origin HEAD:refs/heads/{branch} 2>&1"
    )
    return result.exit_code, result.output


async def push_again(sandbox: SandboxBackend, branch: str) -> tuple[int | None, str]:
    result = await sandbox.aexecute(f"cd widgets && git push origin HEAD:refs/heads/{branch} 2>&1")
    return result.exit_code, result.output


async def upstream_head(upstream: GitServer, branch: str, tmp_path: Path) -> str | None:
    bare = upstream.repository_path(REPOSITORY)
    env = isolated_git_env(tmp_path, {})
    try:
        return (await git("--git-dir", str(bare), "log", "-1", "--format=%s", branch, env=env)).strip()
    except Exception:
        return None


def notices(github: FakeGithub, change: str) -> list[str]:
    """The notices posted on the thread's issue about the held push ``change``."""
    comments = activity_of(github.state).comments_on(REPOSITORY, ISSUE)
    return [comment.body for comment in comments if f"change `{change[:12]}`" in comment.body]


async def last_event(bus: Bus, thread_id: str, event: EventType) -> RunEvent:
    stored = await bus.js.get_last_msg(EVENTS_STREAM, f"drydock.event.{thread_id}.{event}")
    assert stored.data is not None
    return RunEvent.model_validate_json(stored.data)


class TestPlanApproval:
    async def test_pushes_wait_for_the_owner_to_approve_the_newest_plan(
        self,
        sandbox: SandboxBackend,
        thread: str,
        accounts: AccountsStore,
        approvals: Approvals,
        upstream: GitServer,
        tmp_path: Path,
    ) -> None:
        await accounts.save_repository(RepositorySettings(full_name=REPOSITORY, plan_approval=True))
        branch = f"drydock/plan-{thread[:8]}"

        code, output = await commit_and_push(sandbox, "src/app.py", "print(1)\\n", branch)
        assert code != 0
        assert "need a plan approved by its owner first" in output

        first = await approvals.submit_plan(
            thread, "Fix the app", [{"content": "edit src/app.py", "status": "pending"}]
        )
        code, output = await push_again(sandbox, branch)
        assert code != 0
        assert "plan revision 1 is waiting for this thread owner's approval (@drydock approve)" in output

        await approvals.approve_plan(thread, by=OWNER)
        revised = await approvals.submit_plan(thread, "Fix the app, with tests", [{"content": "add a test"}])
        assert (first.revision, revised.revision, revised.approved) == (1, 2, False)
        code, output = await push_again(sandbox, branch)
        assert "plan revision 2 is waiting" in output
        assert await upstream_head(upstream, branch, tmp_path) is None

        approved = await approvals.approve_plan(thread, by=OWNER)
        assert approved is not None
        assert approved.approved_by == OWNER
        code, output = await push_again(sandbox, branch)
        assert code == 0, output
        assert await upstream_head(upstream, branch, tmp_path) == "change src/app.py"

    async def test_without_the_setting_nothing_waits(
        self, sandbox: SandboxBackend, thread: str, accounts: AccountsStore, upstream: GitServer, tmp_path: Path
    ) -> None:
        await accounts.save_repository(RepositorySettings(full_name=REPOSITORY))
        branch = f"drydock/free-{thread[:8]}"
        code, output = await commit_and_push(sandbox, "src/app.py", "print(2)\\n", branch)
        assert code == 0, output
        assert await upstream_head(upstream, branch, tmp_path) == "change src/app.py"


class TestProtectedPaths:
    async def test_a_workflow_push_is_held_until_the_owner_approves_that_exact_change(
        self,
        sandbox: SandboxBackend,
        thread: str,
        accounts: AccountsStore,
        approvals: Approvals,
        upstream: GitServer,
        bus: Bus,
        github: FakeGithub,
        tmp_path: Path,
    ) -> None:
        await accounts.save_repository(RepositorySettings(full_name=REPOSITORY))
        branch = f"drydock/ci-{thread[:8]}"

        code, output = await commit_and_push(sandbox, WORKFLOW, "on: [push, pull_request]\\n", branch)
        assert code != 0
        assert "[remote rejected]" in output
        assert "held for the thread owner's approval" in output
        assert f"changes protected paths: `{WORKFLOW}`" in output
        assert await upstream_head(upstream, branch, tmp_path) is None
        (hold,) = await approvals.pushes(thread)
        assert (hold.paths, hold.approved) == ((WORKFLOW,), False)
        held = await last_event(bus, thread, EventType.PUSH_HELD)
        assert (held.data["change"], held.data["paths"]) == (hold.change, [WORKFLOW])
        (notice,) = notices(github, hold.change)
        assert f"changes protected paths: `{WORKFLOW}`" in notice
        assert "reply `@drydock approve`" in notice

        code, output = await push_again(sandbox, branch)
        assert code != 0
        assert "held for the thread owner's approval" in output
        assert len(await approvals.pushes(thread)) == 1
        assert len(notices(github, hold.change)) == 1

        await approvals.approve(thread, by=OWNER)
        code, output = await push_again(sandbox, branch)
        assert code == 0, output
        assert await upstream_head(upstream, branch, tmp_path) == f"change {WORKFLOW}"

    async def test_an_approval_does_not_apply_to_a_different_push(
        self,
        sandbox: SandboxBackend,
        thread: str,
        accounts: AccountsStore,
        approvals: Approvals,
        upstream: GitServer,
        tmp_path: Path,
    ) -> None:
        await accounts.save_repository(RepositorySettings(full_name=REPOSITORY))
        branch = f"drydock/ci2-{thread[:8]}"
        code, _ = await commit_and_push(sandbox, WORKFLOW, "on: pull_request\\n", branch)
        assert code != 0
        (first,) = await approvals.pushes(thread)
        assert await approvals.approve_push(thread, first.change, by=OWNER) is not None

        code, output = await commit_and_push(sandbox, ".github/workflows/deploy.yml", "on: push\\n", branch)
        assert code != 0
        assert "held for the thread owner's approval" in output
        assert "deploy.yml" in output
        assert await upstream_head(upstream, branch, tmp_path) is None
        second = [hold for hold in await approvals.pushes(thread) if hold.change != first.change]
        assert [hold.approved for hold in second] == [False]
        # The second push carries both commits: the earlier approved change is part of it, yet
        # only an approval of this exact push lets it through.
        assert set(second[0].paths) == {WORKFLOW, ".github/workflows/deploy.yml"}

    async def test_a_push_outside_protected_paths_goes_through(
        self, sandbox: SandboxBackend, thread: str, accounts: AccountsStore, upstream: GitServer, tmp_path: Path
    ) -> None:
        await accounts.save_repository(RepositorySettings(full_name=REPOSITORY, protected_paths=("deploy/**",)))
        branch = f"drydock/docs-{thread[:8]}"
        code, output = await commit_and_push(sandbox, WORKFLOW, "on: workflow_dispatch\\n", branch)
        assert code == 0, output
        assert await upstream_head(upstream, branch, tmp_path) == f"change {WORKFLOW}"
