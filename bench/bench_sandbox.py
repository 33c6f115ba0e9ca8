"""Sandbox figures on the local provider: cold create until the daemon answers health (in
bubblewrap with its own network namespace and the proxy relay, and unisolated), the round trip
of ``true`` through the daemon, and a warm ``ensure_sandbox`` (cache hit, the git identity's
command doubling as the health check, grant refresh with
:class:`~drydock.sandbox.credentials.NoProxy`).

The exec round trip is judged against its floor, measured in alternating rounds: a bare
process spawn in the same isolation (a Python process started by ``bwrap`` with the local
provider's flags spawns the daemon's shell with ``-c true`` through asyncio's subprocess API,
output piped, in a process group of its own, and times each spawn until its exit and end of
output). Target: the round trip at most 1.5 times the spawn. The daemon spawns more cheaply
than that API (no watcher thread, transport or stream reader per command), so a third figure
in the same rounds is the daemon's own executor alone in the same isolation (``run_command``,
no HTTP): the round trip's ratio to it is what the request, its authentication and the client
add.

``pdm run python -m bench sandbox``
"""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

from cryptography.fernet import Fernet

import drydock
from bench.harness import Figures, measure, report
from drydock.config import SandboxSettings, load_settings
from drydock.embedded import embedded_infrastructure
from drydock.infra.redis import Keys, connect_redis
from drydock.infra.server_keys import ServerKeys
from drydock.roles import Role
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.credentials import NoProxy
from drydock.sandbox.handle import SandboxHandle
from drydock.sandbox.lifecycle import SandboxManager
from drydock.sandbox.providers import bubblewrap
from drydock.sandbox.providers.local import LocalProvider
from drydock.sandbox.records import SandboxStore
from drydock.threads.metadata import ThreadMetadataStore

EXEC_ROUNDS = 3
EXECS_PER_ROUND = 200
EXEC_RATIO_TARGET = 1.5
SPAWN_FLOOR = """
import asyncio, json, sys, time

async def spawns(shell, count):
    latencies = []
    for _ in range(count):
        begin = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            shell, "-c", "true", stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, process_group=0,
        )
        await process.communicate()
        latencies.append((time.perf_counter() - begin) * 1000)
    return latencies

print(json.dumps(asyncio.run(spawns(sys.argv[1], int(sys.argv[2])))))
"""
EXECUTOR_ALONE = """
import asyncio, json, os, sys, time
from pathlib import Path
from drydock.sandbox.daemon.execution import ProcessGroups, run_command

async def runs(shell, count):
    groups, latencies = ProcessGroups(), []
    for _ in range(count):
        begin = time.perf_counter()
        await run_command(
            "true", shell=shell, cwd=Path.cwd(), env=dict(os.environ), time_limit=120.0, output_cap=1024 * 1024,
            groups=groups,
        )
        latencies.append((time.perf_counter() - begin) * 1000)
    return latencies

print(json.dumps(asyncio.run(runs(sys.argv[1], int(sys.argv[2])))))
"""


async def spawn_floor(provider: LocalProvider, directory: Path, count: int, script: str = SPAWN_FLOOR) -> list[float]:
    """``count`` spawns of ``bash -c true`` (the daemon's shell) by ``script`` (the bare spawn or
    the daemon's executor) in a process in a bubblewrap sandbox with the local provider's flags;
    their latencies in ms."""
    assert provider.bwrap is not None
    for name in ("workspace", "home", "tmp"):
        (directory / name).mkdir(parents=True, exist_ok=True)
    argv = bubblewrap.bubblewrap_argv(
        provider.bwrap,
        workspace=directory / "workspace",
        home=directory / "home",
        tmp=directory / "tmp",
        readonly=[Path(sys.prefix), Path(sys.base_prefix), Path(drydock.__file__).parents[1]],
        proxy_sockets=provider.proxy_sockets,
    )
    shell = shutil.which("bash") or "/bin/sh"
    process = await asyncio.create_subprocess_exec(
        *argv, sys.executable, "-c", script, shell, str(count), stdout=asyncio.subprocess.PIPE
    )
    output, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the spawn floor failed with exit code {process.returncode}")
    latencies: list[float] = json.loads(output)
    return latencies


async def exec_against_floor(provider: LocalProvider, backend: SandboxBackend, scratch: Path) -> None:
    """The daemon's exec round trip, the bare spawn and the daemon's executor alone, in alternating rounds."""
    floor: list[float] = []
    executor: list[float] = []
    ours: list[float] = []
    for _ in range(EXEC_ROUNDS):
        floor += await spawn_floor(provider, scratch, EXECS_PER_ROUND)
        executor += await spawn_floor(provider, scratch, EXECS_PER_ROUND, EXECUTOR_ALONE)
        figures = await measure("exec", lambda: backend.run("true"), count=EXECS_PER_ROUND, warmup=5)
        ours += figures.latencies_ms
    report(Figures("floor: bare spawn of true in bubblewrap", len(floor), sum(floor) / 1000, floor))
    report(Figures("the daemon's executor alone in bubblewrap", len(executor), sum(executor) / 1000, executor))
    report(
        Figures(f"exec round trip of true ({provider.isolation})", len(ours), sum(ours) / 1000, ours), target_p50_ms=10
    )
    ratio = statistics.median(ours) / statistics.median(floor)
    print(
        f"  exec p50 {statistics.median(ours):.2f} ms, floor p50 {statistics.median(floor):.2f} ms: ratio "
        f"{ratio:.2f}x; target <= {EXEC_RATIO_TARGET}x: {'met' if ratio <= EXEC_RATIO_TARGET else 'MISSED'}",
        flush=True,
    )
    alone = statistics.median(executor)
    print(
        f"  over the daemon's executor alone (p50 {alone:.2f} ms): {statistics.median(ours) / alone:.2f}x "
        "(what the request, its authentication and the client add)",
        flush=True,
    )


async def main() -> None:
    async with embedded_infrastructure() as urls:
        settings = load_settings(
            nats={"url": urls.nats}, redis={"url": urls.redis}, crypto={"keys": [Fernet.generate_key().decode()]}
        )
        redis = await connect_redis(settings.redis)
        keys = Keys(prefix=f"bench-{uuid.uuid4().hex[:8]}")
        records = SandboxStore(redis, keys, ServerKeys.from_settings(settings.crypto))
        with tempfile.TemporaryDirectory(prefix="drydock-bench-") as root:
            for bubblewrap in (True, False):
                sandbox_settings = SandboxSettings(
                    local_root=root, local_bubblewrap=bubblewrap, local_allow_unisolated=not bubblewrap
                )
                provider = LocalProvider(sandbox_settings, records)
                created: list[SandboxHandle] = []

                async def create(provider: LocalProvider = provider, created: list[SandboxHandle] = created) -> None:
                    created.append(await provider.create("bench"))

                report(
                    await measure(f"local cold create ({provider.isolation})", create, count=15, warmup=1),
                    target_p50_ms=1000,
                )
                for handle in created:
                    await provider.delete(handle.id)

            sandbox_settings = SandboxSettings(local_root=root)
            provider = LocalProvider(sandbox_settings, records)
            handle = await provider.create("bench")
            backend = SandboxBackend(handle)
            if provider.bwrap is not None:
                await exec_against_floor(provider, backend, Path(root) / "floor")
            else:
                print("  no bubblewrap here: the exec round trip has no floor to be judged by", flush=True)
                report(
                    await measure(
                        f"exec round trip of true ({provider.isolation})", lambda: backend.run("true"), count=500
                    ),
                    target_p50_ms=10,
                )
            await backend.aclose()
            await provider.delete(handle.id)

            metadata = ThreadMetadataStore(redis, keys)
            thread_id = str(uuid.uuid4())
            await metadata.create(thread_id, kind=Role.CODER)
            manager = SandboxManager(
                provider=provider,
                records=records,
                metadata=metadata,
                credentials=NoProxy(),
                redis=redis,
                keys=keys,
                settings=sandbox_settings,
            )
            await manager.ensure_sandbox(thread_id)
            report(
                await measure("warm ensure_sandbox (NoProxy)", lambda: manager.ensure_sandbox(thread_id), count=300),
                target_p50_ms=10,
            )
            await manager.aclose()
            for leftover in await provider.list():
                await provider.delete(leftover.id)
        await redis.aclose()
