"""Clone of a ~10 MB repository through the credential proxy vs directly from the same upstream.

Everything runs on loopback: embedded NATS and Valkey, the fake GitHub minting the installation
token and a ``git http-backend`` upstream that checks it (both in this process, standing in for
GitHub), and the proxy as its own process (``drydock serve credential-proxy``), as deployed.
Both clones use the same installation token upstream; the proxied one gets it injected by the
proxy (grant lookup, token decryption, streaming both ways). Runs alternate so that load
changes hit both alike. Target: proxied p50 within 10% of direct p50.

Then a replica's throughput: API requests from :data:`CALLERS` callers at once and
:data:`CLONES_AT_ONCE` clones at once through the proxy, with the proxy process's CPU time per
request and per clone read from ``/proc``. The bench's own process (the fake GitHub, the git
upstream, the callers) shares the machine's cores with it, so the requests per second are what
this machine gives; the CPU per request is the proxy's alone, and what a replica's CPU limit
divides.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from cryptography.fernet import Fernet

from bench.harness import Figures, cpu_seconds, measure, report
from drydock.config import Settings, load_settings
from drydock.credentials import ProxyCredentials, digest
from drydock.embedded import embedded_infrastructure, free_port
from drydock.roles import Role
from drydock.runtime import open_runtime
from drydock.sandbox.handle import Isolation, SandboxHandle
from tests.fakes.git_server import GitServer, git, isolated_git_env
from tests.fakes.github import FakeGithub

REPOSITORY = "bench/big"
RUNS = 15
TARGET_OVERHEAD = 0.10
CALLERS = 32
REQUESTS = 3_000
CLONES_AT_ONCE = 4
CLONES = 20


def _content() -> dict[str, bytes]:
    """About 10 MB that does not compress (random blobs) plus a few hundred small source files."""
    files = {f"assets/blob-{index}.bin": os.urandom(1 << 20) for index in range(9)}
    files.update({f"src/module_{index}.py": f"VALUE = {index}\n".encode() * 200 for index in range(300)})
    return files


async def _timed_clone(url: str, target: Path, env: dict[str, str]) -> float:
    shutil.rmtree(target, ignore_errors=True)
    started = time.perf_counter()
    await git("clone", "-q", url, str(target), env=env)
    elapsed = (time.perf_counter() - started) * 1000
    shutil.rmtree(target)
    return elapsed


@contextlib.asynccontextmanager
async def _proxy_process(settings: Settings) -> AsyncIterator[tuple[str, str, int]]:
    """``drydock serve credential-proxy`` on free ports with ``settings``; yields its two URLs
    and its process id."""
    assert settings.github.private_key is not None
    port, egress_port = free_port(), free_port()
    env = {
        **{name: value for name, value in os.environ.items() if not name.startswith("DRYDOCK_")},
        "DRYDOCK_NATS_URL": str(settings.nats.url),
        "DRYDOCK_REDIS_URL": str(settings.redis.url),
        "DRYDOCK_GITHUB_API_URL": settings.github.api_url,
        "DRYDOCK_GITHUB_APP_ID": str(settings.github.app_id),
        "DRYDOCK_GITHUB_PRIVATE_KEY": settings.github.private_key.get_secret_value(),
        "DRYDOCK_CRYPTO_KEYS": json.dumps([key.get_secret_value() for key in settings.crypto.keys]),
        "DRYDOCK_PROXY_GIT_UPSTREAM": str(settings.proxy.git_upstream),
        "DRYDOCK_PROXY_PORT": str(port),
        "DRYDOCK_PROXY_EGRESS_PORT": str(egress_port),
        "DRYDOCK_LOG_LEVEL": "WARNING",
    }
    child = await asyncio.create_subprocess_exec(
        Path(sys.executable).parent / "drydock", "serve", "credential-proxy", env=env
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(trust_env=False) as client:
            for _ in range(1200):
                try:
                    if (await client.get(f"{url}/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
            else:
                raise RuntimeError("credential-proxy did not become ready within 60 s")
        yield url, f"http://127.0.0.1:{egress_port}", child.pid
    finally:
        child.terminate()
        await child.wait()


@dataclass(frozen=True)
class Load:
    """``count`` operations from ``at_once`` callers in ``seconds``, the proxy using ``cpu_seconds``."""

    count: int
    at_once: int
    seconds: float
    cpu_seconds: float

    @property
    def per_second(self) -> float:
        return self.count / self.seconds

    @property
    def cpu_ms(self) -> float:
        """The proxy's CPU time per operation."""
        return self.cpu_seconds * 1000 / self.count


async def _load(pid: int, operation: Callable[[], Awaitable[object]], *, count: int, at_once: int) -> Load:
    """``operation`` ``count`` times, ``at_once`` at a time, with the CPU time process ``pid`` spent."""
    left = iter(range(count))

    async def caller() -> None:
        for _ in left:
            await operation()

    cpu_before = cpu_seconds(pid, children=True)
    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(at_once)))
    return Load(count, at_once, time.perf_counter() - started, cpu_seconds(pid, children=True) - cpu_before)


async def _ok(request: Awaitable[httpx.Response]) -> None:
    response = await request
    if response.status_code != 200:
        raise RuntimeError(f"unexpected {response.status_code}: {response.text[:200]}")


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as scratch:
        root = Path(scratch)
        async with embedded_infrastructure() as urls, FakeGithub() as github:
            app = github.create_app()
            github.install(app, "bench", ["big"])
            async with GitServer(root / "upstream", authorize=github.git_access) as upstream:
                await upstream.create_repository(REPOSITORY, _content())
                settings = load_settings(
                    nats={"url": urls.nats},
                    redis={"url": urls.redis},
                    github={"api_url": github.base_url, "app_id": app.id, "private_key": app.private_key_pem},
                    crypto={"keys": [Fernet.generate_key().decode()]},
                    proxy={"port": 0, "egress_port": 0, "git_upstream": upstream.base_url},
                )
                async with open_runtime(settings, name="bench") as runtime, _proxy_process(settings) as proxy:
                    proxy_url, egress_url, proxy_pid = proxy
                    section = settings.proxy.model_copy(update={"url": proxy_url, "egress_url": egress_url})
                    worker_settings = settings.model_copy(update={"proxy": section})
                    credentials = ProxyCredentials.create(worker_settings, runtime.redis, runtime.keys)
                    home = root / "sandbox-home"
                    home.mkdir()
                    handle = SandboxHandle(
                        id="bench-sandbox",
                        provider="local",
                        thread_id="bench-thread",
                        base_url="http://127.0.0.1:9",
                        token="unused",
                        workspace=str(home),
                        created_at=datetime.now(UTC),
                        isolation=Isolation.NONE,
                    )
                    grant = await credentials.issue(
                        handle, thread_id="bench-thread", role=Role.CODER, repository=REPOSITORY
                    )
                    assert grant.token is not None
                    sandbox_env = isolated_git_env(home, grant.environment)
                    for key, value in grant.git_config:
                        await git("config", "--global", "--add", key, value, env=sandbox_env)
                    token = await credentials.vault.get(digest(grant.token))
                    assert token is not None
                    direct_env = isolated_git_env(root / "direct-home")
                    (root / "direct-home").mkdir()
                    direct_url = upstream.base_url.replace("http://", f"http://x-access-token:{token.token}@")
                    direct_url += f"/{REPOSITORY}.git"
                    proxied_url = f"https://github.com/{REPOSITORY}.git"

                    pack = sum(path.stat().st_size for path in upstream.repository_path(REPOSITORY).rglob("*.pack"))
                    print(f"repository: {REPOSITORY}, pack {pack / 1e6:.1f} MB; {RUNS} clones each, alternating")
                    await _timed_clone(direct_url, root / "warm-direct", direct_env)
                    await _timed_clone(proxied_url, home / "warm-proxied", sandbox_env)
                    direct: list[float] = []
                    proxied: list[float] = []
                    started = time.perf_counter()
                    for _ in range(RUNS):
                        direct.append(await _timed_clone(direct_url, root / "direct", direct_env))
                        proxied.append(await _timed_clone(proxied_url, home / "proxied", sandbox_env))
                    total = time.perf_counter() - started

                    api_direct = httpx.AsyncClient(
                        base_url=github.base_url, headers={"Authorization": f"Bearer {token.token}"}, trust_env=False
                    )
                    assert grant.api_base_url is not None
                    api_proxied = httpx.AsyncClient(base_url=grant.api_base_url, trust_env=False)
                    async with api_direct, api_proxied:
                        small = [
                            await measure(
                                "API GET /repos/{owner}/{repo} direct",
                                lambda: _ok(api_direct.get(f"/repos/{REPOSITORY}")),
                                count=300,
                            ),
                            await measure(
                                "API GET /repos/{owner}/{repo} through proxy",
                                lambda: _ok(api_proxied.get(f"/repos/{REPOSITORY}")),
                                count=300,
                            ),
                        ]
                        api_load = await _load(
                            proxy_pid,
                            lambda: _ok(api_proxied.get(f"/repos/{REPOSITORY}")),
                            count=REQUESTS,
                            at_once=CALLERS,
                        )
                    targets = itertools.count()
                    clone_load = await _load(
                        proxy_pid,
                        lambda: _timed_clone(proxied_url, home / f"load-{next(targets)}", sandbox_env),
                        count=CLONES,
                        at_once=CLONES_AT_ONCE,
                    )
                    checked = await measure(
                        "grant refresh within grant_refresh_interval (checked only)",
                        lambda: credentials.refresh(grant),
                        count=200,
                    )
                    always = section.model_copy(update={"grant_refresh_interval": timedelta(0)})
                    extending = ProxyCredentials.create(
                        worker_settings.model_copy(update={"proxy": always}), runtime.redis, runtime.keys
                    )
                    refresh = await measure(
                        "grant refresh after the interval (extended, fresh token from fake GitHub)",
                        lambda: extending.refresh(grant),
                        count=200,
                    )
                    await credentials.revoke(grant)
                    await extending.aclose()
                    await credentials.aclose()

        direct_figures = report(Figures("clone 10 MB direct", RUNS, total / 2, direct))
        proxied_figures = report(Figures("clone 10 MB through credential proxy", RUNS, total / 2, proxied))
        overhead = proxied_figures.percentile(50) / direct_figures.percentile(50) - 1
        paired = statistics.median(through / plain for plain, through in zip(direct, proxied, strict=True)) - 1
        verdict = "met" if overhead <= TARGET_OVERHEAD else "MISSED"
        print(
            f"proxy overhead at p50: {overhead * 100:+.1f}% (median of paired runs: {paired * 100:+.1f}%)  "
            f"target <= +{TARGET_OVERHEAD * 100:.0f}%: {verdict}"
        )
        for figures in [*small, checked, refresh]:
            report(figures)
        print(
            f"through the proxy, {api_load.at_once} callers at once: {api_load.count} API GETs at "
            f"{api_load.per_second:.0f} per second; the proxy's CPU {api_load.cpu_ms:.2f} ms per request "
            f"(a core of its own: about {1000 / api_load.cpu_ms:.0f} requests per second, derived)"
        )
        print(
            f"through the proxy, {clone_load.at_once} clones at once: {clone_load.count} clones of "
            f"{pack / 1e6:.1f} MB, {clone_load.count * pack / 1e6 / clone_load.seconds:.1f} MB/s; the proxy's CPU "
            f"{clone_load.cpu_ms:.0f} ms per clone, {clone_load.cpu_ms / (pack / 1e6):.1f} ms per MB "
            f"(a core of its own: about {1000 / clone_load.cpu_ms * pack / 1e6:.0f} MB/s, derived)"
        )
