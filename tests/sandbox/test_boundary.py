"""The sandbox boundary, tried from inside: each test runs commands as the agent's ``execute``
tool does (``aexecute`` on the backend that ``ensure_sandbox`` gives a coder thread, through the
real daemon in a real bubblewrap sandbox) and fails if an attempt to leave the sandbox succeeds.
The positive tests show what must still work: git and egress through the credential proxy."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp import web
from cryptography.fernet import Fernet
from nats.aio.client import Client as NatsClient
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.config import SandboxSettings, Settings, load_settings
from drydock.credentials import ProxyCredentials
from drydock.embedded import EmbeddedUrls
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.runtime import Runtime
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.lifecycle import SandboxManager
from drydock.sandbox.providers.local import DIRECTORY_LABEL, LocalProvider
from drydock.sandbox.records import SandboxStore
from drydock.threads.metadata import ThreadMetadataStore
from services.credential_proxy.server import Listening, serving
from tests.fakes.git_server import GitServer, git, isolated_git_env
from tests.fakes.github import FakeGithub

pytestmark = pytest.mark.usefixtures("bwrap")

REPOSITORY = "acme/widgets"
CHECKOUT = Path(__file__).resolve().parents[2]

PROBE = """
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
started = time.monotonic()
try:
    socket.create_connection((host, port), timeout=5).close()
    print("CONNECTED")
except OSError as error:
    print(f"REFUSED {type(error).__name__} {error.errno} {time.monotonic() - started:.3f}")
"""


@pytest.fixture(scope="module")
async def github() -> AsyncIterator[FakeGithub]:
    async with FakeGithub() as fake:
        yield fake


@pytest.fixture(scope="module")
async def upstream(github: FakeGithub, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GitServer]:
    async with GitServer(tmp_path_factory.mktemp("upstream"), authorize=github.git_access) as server:
        await server.create_repository(REPOSITORY, {"README.md": b"# widgets\n"})
        yield server


@pytest.fixture
async def web_port() -> AsyncIterator[int]:
    """A loopback web service on the host, listed in the egress allowlist."""

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="host web service\n")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    yield sock.getsockname()[1]
    await runner.cleanup()


@pytest.fixture
async def proxy(
    infra: EmbeddedUrls,
    github: FakeGithub,
    upstream: GitServer,
    web_port: int,
    tmp_path: Path,
    nats_client: NatsClient,
    bus: Bus,
    redis: Redis,
    keys: Keys,
) -> AsyncIterator[tuple[Settings, Listening]]:
    """The credential proxy with its sockets in a directory of this test; the settings are a
    worker's (the proxy's URLs as sandboxes reach them)."""
    app = github.create_app()
    github.install(app, "acme", ["widgets"])
    overrides: dict[str, dict[str, Any]] = {
        "nats": {"url": infra.nats},
        "redis": {"url": infra.redis},
        "github": {"api_url": github.base_url, "app_id": app.id, "private_key": app.private_key_pem},
        "crypto": {"keys": [Fernet.generate_key().decode()]},
        "proxy": {
            "port": 0,
            "egress_port": 0,
            "git_upstream": upstream.base_url,
            "socket_dir": str(tmp_path / "proxy"),
            "egress_allowlist": [f"127.0.0.1:{web_port}"],
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
    """What a coder worker holds: local sandboxes and grants of the credential proxy."""
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


async def _coder_sandbox(manager: SandboxManager, metadata: ThreadMetadataStore) -> SandboxBackend:
    thread_id = str(uuid.uuid4())
    await metadata.create(thread_id, kind=Role.CODER, fields={"repository": REPOSITORY})
    return await manager.ensure_sandbox(thread_id)


@pytest.fixture
async def sandbox(manager: SandboxManager, metadata: ThreadMetadataStore) -> SandboxBackend:
    return await _coder_sandbox(manager, metadata)


async def execute(sandbox: SandboxBackend, command: str) -> str:
    """What the agent's ``execute`` tool gets back."""
    return (await sandbox.aexecute(command)).output


async def connect(sandbox: SandboxBackend, host: str, port: int) -> str:
    return await execute(sandbox, f"python3 -c '{PROBE}' {host} {port}")


def _port(url: str | None) -> int:
    port = urlsplit(url or "").port
    assert port is not None
    return port


class TestNoConnectionLeavesTheSandbox:
    async def test_redis(self, sandbox: SandboxBackend, infra: EmbeddedUrls) -> None:
        assert (await connect(sandbox, "127.0.0.1", _port(infra.redis))).startswith("REFUSED ConnectionRefused")

    async def test_nats(self, sandbox: SandboxBackend, infra: EmbeddedUrls) -> None:
        assert (await connect(sandbox, "127.0.0.1", _port(infra.nats))).startswith("REFUSED ConnectionRefused")

    async def test_a_web_port(self, sandbox: SandboxBackend, web_port: int) -> None:
        assert (await connect(sandbox, "127.0.0.1", web_port)).startswith("REFUSED ConnectionRefused")
        fetched = await execute(sandbox, f"curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{web_port}/")
        assert "host web service" not in fetched

    async def test_the_proxy_ports_themselves(self, sandbox: SandboxBackend, proxy: tuple[Settings, Listening]) -> None:
        """Inside, the proxy URLs' ports answer (the relay, the same numbers as on the host) and
        every other port is refused."""
        _, listening = proxy
        for url in (listening.url, listening.egress_url):
            assert (await connect(sandbox, "127.0.0.1", _port(url))).startswith("CONNECTED")
        assert (await connect(sandbox, "127.0.0.1", 1)).startswith("REFUSED ConnectionRefused")

    async def test_a_sibling_sandbox_daemon(
        self, sandbox: SandboxBackend, manager: SandboxManager, metadata: ThreadMetadataStore
    ) -> None:
        sibling = await _coder_sandbox(manager, metadata)
        port = _port(sibling.handle.base_url)
        assert (await connect(sandbox, "127.0.0.1", port)).startswith("REFUSED ConnectionRefused")

    async def test_the_metadata_address_fails_at_once_without_a_route(self, sandbox: SandboxBackend) -> None:
        answer = (await connect(sandbox, "169.254.169.254", 80)).split()
        assert answer[:3] == ["REFUSED", "OSError", "101"], answer  # ENETUNREACH: no packet is sent
        assert float(answer[3]) < 0.5

    async def test_no_interface_but_loopback(self, sandbox: SandboxBackend) -> None:
        interfaces = await execute(sandbox, "python3 -c 'import socket; print(*(n for _, n in socket.if_nameindex()))'")
        assert interfaces.split() == ["lo"]


class TestHostSecretsStayOutside:
    @pytest.fixture
    def marker(self, monkeypatch: pytest.MonkeyPatch) -> str:
        secret = f"drydock-marker-{secrets.token_hex(8)}"
        monkeypatch.setenv("DRYDOCK_TEST_WORKER_SECRET", secret)
        return secret

    async def test_the_worker_environment(self, sandbox: SandboxBackend, marker: str) -> None:
        # A process started now carries the marker in /proc/<pid>/environ (this process's own
        # environ block predates the marker).
        worker = await asyncio.create_subprocess_exec("sleep", "60", env=dict(os.environ))
        try:
            seen = await execute(
                sandbox,
                f"cat /proc/{worker.pid}/environ /proc/{os.getpid()}/environ 2>&1; "
                "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -a drydock-marker",
            )
            assert marker not in seen
            held = await asyncio.to_thread(Path(f"/proc/{worker.pid}/environ").read_bytes)
            assert held.count(marker.encode()) == 1
        finally:
            worker.kill()
            await worker.wait()

    async def test_a_sibling_workspace(
        self, sandbox: SandboxBackend, manager: SandboxManager, metadata: ThreadMetadataStore
    ) -> None:
        sibling = await _coder_sandbox(manager, metadata)
        secret = secrets.token_hex(8)
        await execute(sibling, f"echo {secret} > {sibling.handle.workspace}/sibling-secret.txt")
        host_path = Path(sibling.handle.labels[DIRECTORY_LABEL]) / "workspace" / "sibling-secret.txt"
        assert (await asyncio.to_thread(host_path.read_text)).strip() == secret
        seen = await execute(
            sandbox,
            f"cat {host_path} 2>&1; ls -R {host_path.parents[2]} /tmp 2>&1; "
            f"cat /workspace/sibling-secret.txt {sibling.handle.workspace}/sibling-secret.txt 2>&1",
        )
        assert secret not in seen

    async def test_a_host_file_root_and_the_checkout(self, sandbox: SandboxBackend, tmp_path: Path) -> None:
        secret = secrets.token_hex(8)
        host_file = tmp_path / "host-secret.txt"
        host_file.write_text(secret)
        checkout = CHECKOUT
        seen = await execute(
            sandbox,
            f"cat {host_file} 2>&1; ls -a /root 2>&1; cat {checkout}/README.md {checkout}/AGENTS.md 2>&1 | head -3; "
            f"ls {checkout}/.git 2>&1",
        )
        assert secret not in seen
        assert "Drydock" not in seen
        assert "HEAD" not in seen


KERNEL_SETTINGS = """
import os
for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/panic", "/proc/sys/vm/drop_caches"):
    try:
        os.close(os.open(path, os.O_WRONLY))
        print(path, "WRITABLE")
    except OSError as error:
        print(path, error.strerror)
"""

DAEMON = """
import ctypes, os
def python_daemon(pid):
    argv = open(f"/proc/{pid}/cmdline", "rb").read().split(bytes(1))
    return b"drydock.sandbox.daemon" in argv and b"python" in argv[0]
daemon = next(pid for pid in os.listdir("/proc") if pid.isdigit() and python_daemon(pid))
def attempt(name, action):
    try:
        action()
        print(name, "READ")
    except OSError as error:
        print(name, error.strerror)
attempt("environ", lambda: open(f"/proc/{daemon}/environ", "rb").read())
attempt("mem", lambda: open(f"/proc/{daemon}/mem", "rb").close())
attempt("fd", lambda: open(f"/proc/{daemon}/fd/1", "ab").close())
libc = ctypes.CDLL(None, use_errno=True)
pidfd = os.pidfd_open(int(daemon))
def steal():
    if libc.syscall(438, pidfd, 3, 0) < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
attempt("pidfd_getfd", steal)
"""
"""Reading the daemon's environment and memory, opening its standard output (a file on the host)
and copying its listening socket with ``pidfd_getfd`` (syscall 438), as the commands it runs."""


class TestTheHostKernelAndTheDaemonStayOutside:
    async def test_the_kernel_s_settings_cannot_be_changed(self, sandbox: SandboxBackend) -> None:
        # A worker running as root runs sandboxes as the host's uid 0 (without capabilities),
        # which the kernel lets write /proc/sys: core_pattern would run a program as host root.
        found = (await execute(sandbox, f"python3 -c '{KERNEL_SETTINGS}'")).splitlines()
        assert len(found) == 3, found
        assert not [line for line in found if line.endswith("WRITABLE")], found
        if os.geteuid() == 0:
            assert all(line.endswith("Read-only file system") for line in found), found

    async def test_its_commands_cannot_read_or_rob_the_daemon(self, sandbox: SandboxBackend) -> None:
        found = dict(line.split(" ", 1) for line in (await execute(sandbox, f"python3 -c '{DAEMON}'")).splitlines())
        assert found == {
            "environ": "Permission denied",
            "mem": "Permission denied",
            "fd": "Permission denied",
            "pidfd_getfd": "Operation not permitted",
        }


class TestTheProxyStillServes:
    async def test_git_clone_and_push(self, sandbox: SandboxBackend, upstream: GitServer, tmp_path: Path) -> None:
        result = await sandbox.aexecute(
            f"git clone -q https://github.com/{REPOSITORY}.git widgets && cd widgets && cat README.md && "
            "echo boundary > BOUNDARY.md && git add BOUNDARY.md && git commit -qm 'from the isolated sandbox' && "
            "git push -q origin HEAD:refs/heads/boundary && echo pushed"
        )
        assert result.exit_code == 0, result.output
        assert result.output.split() == ["#", "widgets", "pushed"]
        bare = upstream.repository_path(REPOSITORY)
        env = isolated_git_env(tmp_path, {})
        assert (await git("--git-dir", str(bare), "log", "-1", "--format=%s", "boundary", env=env)).strip() == (
            "from the isolated sandbox"
        )

    async def test_egress_to_an_allowlisted_host(self, sandbox: SandboxBackend, web_port: int) -> None:
        url = f"http://127.0.0.1:{web_port}/"
        # NO_PROXY lists loopback for the proxy's own URLs; this host is reached through the egress proxy.
        fetched = await execute(sandbox, f'curl -sS --max-time 10 --proxy "$HTTP_PROXY" --noproxy "" {url}')
        assert fetched == "host web service\n"

    async def test_a_restarted_proxy_is_reached_again(
        self, sandbox: SandboxBackend, manager: SandboxManager, proxy: tuple[Settings, Listening], web_port: int
    ) -> None:
        """The socket directory is bound, not the sockets: the socket a new proxy puts in place is seen."""
        settings, first = proxy
        replica = settings.proxy.model_copy(update={"port": 0, "egress_port": 0})
        runtime = replace(first.context.runtime, settings=settings.model_copy(update={"proxy": replica}))
        async with serving(runtime) as second:
            assert second.socket_dir == first.socket_dir
            fetched = await execute(
                sandbox, f'curl -sS --max-time 10 --proxy "$HTTP_PROXY" --noproxy "" http://127.0.0.1:{web_port}/'
            )
            assert fetched == "host web service\n"
