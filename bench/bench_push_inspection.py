"""What inspecting a push for protected paths costs: small pushes through the credential proxy to
a ~10 MB repository, with the repository's protected paths on (the default,
``.github/workflows/**``: the proxy spools the push, fetches its mirror, indexes the pack and
diffs) and off (``[]``: streamed straight through). Alternating runs, so load changes hit both
alike; the proxy runs in this process on loopback, with embedded NATS and Valkey, the fake GitHub
and a ``git http-backend`` upstream.
"""

from __future__ import annotations

import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from cryptography.fernet import Fernet

from bench.harness import Figures, report
from drydock.accounts import AccountsStore
from drydock.accounts.records import RepositorySettings
from drydock.config import load_settings
from drydock.credentials import ProxyCredentials
from drydock.embedded import embedded_infrastructure
from drydock.roles import Role
from drydock.runtime import open_runtime
from drydock.sandbox.handle import Isolation, SandboxHandle
from services.credential_proxy.server import serving
from tests.fakes.git_server import GitServer, git, isolated_git_env
from tests.fakes.github import FakeGithub

REPOSITORY = "bench/big"
RUNS = 15


def _content() -> dict[str, bytes]:
    files = {f"assets/blob-{index}.bin": os.urandom(1 << 20) for index in range(9)}
    files.update({f"src/module_{index}.py": f"VALUE = {index}\n".encode() * 200 for index in range(300)})
    files[".github/workflows/ci.yml"] = b"on: push\n"
    return files


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-push-") as scratch:
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
                    proxy={"port": 0, "egress_port": 0, "git_upstream": upstream.base_url,
                           "socket_dir": str(root / "sockets")},
                )  # fmt: skip
                async with open_runtime(settings, name="bench") as runtime, serving(runtime) as listening:
                    section = settings.proxy.model_copy(update={"url": listening.url})
                    credentials = ProxyCredentials.create(
                        settings.model_copy(update={"proxy": section}), runtime.redis, runtime.keys
                    )
                    home = root / "sandbox-home"
                    home.mkdir()
                    handle = SandboxHandle(
                        id="bench-sandbox", provider="local", thread_id="bench-thread", base_url="http://127.0.0.1:9",
                        token="unused", workspace=str(home), created_at=datetime.now(UTC), isolation=Isolation.NONE,
                    )  # fmt: skip
                    grant = await credentials.issue(
                        handle, thread_id="bench-thread", role=Role.CODER, repository=REPOSITORY
                    )
                    env = isolated_git_env(home, grant.environment)
                    for key, value in grant.git_config:
                        await git("config", "--global", "--add", key, value, env=env)
                    work = home / "big"
                    await git("clone", "-q", f"https://github.com/{REPOSITORY}.git", str(work), env=env)
                    accounts = AccountsStore(runtime.redis, runtime.keys, host="github.com")

                    async def push(run: int, protected: bool) -> float:
                        paths = (".github/workflows/**",) if protected else ()
                        await accounts.save_repository(RepositorySettings(full_name=REPOSITORY, protected_paths=paths))
                        (work / "src" / f"change_{run}_{protected}.py").write_text(f"RUN = {run}\n")
                        await git("add", "-A", cwd=work, env=env)
                        await git("commit", "-qm", f"run {run}", cwd=work, env=env)
                        started = time.perf_counter()
                        await git("push", "-q", "origin", f"HEAD:refs/heads/bench-{run}-{protected}", cwd=work, env=env)
                        return (time.perf_counter() - started) * 1000

                    await push(-1, True)
                    inspected: list[float] = []
                    plain: list[float] = []
                    started = time.perf_counter()
                    for run in range(RUNS):
                        plain.append(await push(run, False))
                        inspected.append(await push(run, True))
                    total = time.perf_counter() - started
                    await credentials.revoke(grant)
                    await credentials.aclose()
        print(f"repository: {REPOSITORY} (~10 MB); {RUNS} small pushes each, alternating")
        off = report(Figures("push, protected paths off (streamed through)", RUNS, total / 2, plain))
        on = report(Figures("push, protected paths on (spooled, mirror fetched, pack indexed, diffed)", RUNS,
                            total / 2, inspected))  # fmt: skip
        print(f"inspection cost at p50: {on.percentile(50) - off.percentile(50):+.1f} ms per push")
