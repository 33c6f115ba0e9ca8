"""Run one shell command: combined output under a cap, a timeout that kills the whole process
group, and a bound on how many commands run at once."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from drydock.sandbox.daemon.protocol import TIMEOUT_EXIT_CODE

_CHUNK = 64 * 1024


class ExecQueueFull(RuntimeError):
    """Every exec slot is busy and the queue of waiting execs is full."""


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    output: str
    truncated: bool
    timed_out: bool
    duration_ms: float


class ExecSlots:
    """At most ``limit`` commands run at once; up to ``queue_limit`` more wait for a slot
    (the wait does not count against their timeout); beyond that :class:`ExecQueueFull`."""

    def __init__(self, limit: int, queue_limit: int) -> None:
        self._semaphore = asyncio.Semaphore(limit)
        self._queue_limit = queue_limit
        self._waiting = 0
        self.running = 0

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self._semaphore.locked() and self._waiting >= self._queue_limit:
            raise ExecQueueFull(f"{self.running} commands are running and {self._waiting} are waiting")
        self._waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self._waiting -= 1
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._semaphore.release()


class ProcessGroups:
    """The process groups of running commands, so that shutdown can kill them all."""

    def __init__(self) -> None:
        self._groups: set[int] = set()

    def add(self, pgid: int) -> None:
        self._groups.add(pgid)

    def discard(self, pgid: int) -> None:
        self._groups.discard(pgid)

    def kill_all(self) -> None:
        for pgid in list(self._groups):
            _kill_group(pgid)
        self._groups.clear()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


async def run_command(
    command: str,
    *,
    shell: str,
    cwd: Path,
    env: Mapping[str, str],
    time_limit: float,
    output_cap: int,
    groups: ProcessGroups,
    drain_grace: float = 0.25,
) -> ExecResult:
    """Run ``command`` with ``shell -c`` in a process group of its own.

    At ``time_limit`` seconds the whole group (the shell and everything it started) is killed with SIGKILL.
    After the shell exits, output is read until every writer has closed the pipe, but for at
    most ``drain_grace`` seconds: a background process that keeps the pipe open (``server &``)
    keeps running, its later output is not collected.
    """
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        shell,
        "-c",
        command,
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        process_group=0,
    )
    groups.add(process.pid)
    kept = bytearray()
    truncated = False

    async def collect() -> None:
        nonlocal truncated
        assert process.stdout is not None
        while chunk := await process.stdout.read(_CHUNK):
            room = output_cap - len(kept)
            if len(chunk) > room:
                truncated = True
                kept.extend(chunk[: max(room, 0)])
            else:
                kept.extend(chunk)

    collector = asyncio.create_task(collect())
    timed_out = False
    try:
        try:
            await asyncio.wait_for(process.wait(), time_limit)
        except TimeoutError:
            timed_out = True
            _kill_group(process.pid)
            await process.wait()
        try:
            await asyncio.wait_for(asyncio.shield(collector), drain_grace)
        except TimeoutError:
            collector.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await collector
    except BaseException:
        # The request was cancelled (client gone, daemon stopping): leave nothing running.
        _kill_group(process.pid)
        collector.cancel()
        raise
    finally:
        groups.discard(process.pid)
    assert process.returncode is not None
    return ExecResult(
        exit_code=TIMEOUT_EXIT_CODE if timed_out else _exit_code(process.returncode),
        output=kept.decode("utf-8", errors="replace"),
        truncated=truncated,
        timed_out=timed_out,
        duration_ms=(time.monotonic() - started) * 1000,
    )
