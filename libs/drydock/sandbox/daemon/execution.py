"""Run one shell command: combined output under a cap, a timeout that kills the whole process
group, and a bound on how many commands run at once."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

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


class _Output:
    """The command's combined output, read as the event loop reports it readable; at most ``cap``
    bytes kept, the rest read and dropped so that the writer never blocks on a full pipe."""

    def __init__(self, pipe: IO[bytes], cap: int, loop: asyncio.AbstractEventLoop) -> None:
        self._pipe = pipe
        self._fd = pipe.fileno()
        self._cap = cap
        self._loop = loop
        self.kept = bytearray()
        self.truncated = False
        self.ended: asyncio.Future[None] = loop.create_future()
        os.set_blocking(self._fd, False)
        loop.add_reader(self._fd, self._read)

    def _read(self) -> None:
        try:
            chunk = os.read(self._fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.close()
            return
        room = self._cap - len(self.kept)
        if len(chunk) > room:
            self.truncated = True
            self.kept.extend(chunk[: max(room, 0)])
        else:
            self.kept.extend(chunk)

    def close(self) -> None:
        """Stop reading: a writer still holding the pipe gets EPIPE from here on."""
        if self._pipe.closed:
            return
        self._loop.remove_reader(self._fd)
        self._pipe.close()
        if not self.ended.done():
            self.ended.set_result(None)


def _exited(process: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
    """Done when ``process`` has exited. The process is reaped whether or not anyone still awaits
    the future (a cancelled request leaves its killed shell to be reaped here)."""
    exited: asyncio.Future[None] = loop.create_future()

    def reaped() -> None:
        if not exited.done():
            exited.set_result(None)

    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        # No pidfd (not Linux, or a kernel before 5.3): a thread waits, as asyncio's own child
        # watcher does. A dedicated thread, not the default executor, which long commands would fill.
        def wait() -> None:
            process.wait()
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
                loop.call_soon_threadsafe(reaped)

        threading.Thread(target=wait, name=f"wait-{process.pid}", daemon=True).start()
        return exited

    def readable() -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)
        process.wait()
        reaped()

    loop.add_reader(pidfd, readable)
    return exited


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

    The shell is started with :class:`subprocess.Popen` and watched by the event loop directly
    (its pidfd and its output pipe), not through asyncio's subprocess transport: that costs a
    thread, a transport, a protocol and a stream reader per command, twice the CPU of the spawn
    itself (measured).
    """
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    # Popen returns once the child has called exec (vfork), as in asyncio's own subprocess transport.
    process = subprocess.Popen(  # noqa: ASYNC220
        [shell, "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        process_group=0,
    )
    groups.add(process.pid)
    assert process.stdout is not None
    output = _Output(process.stdout, output_cap, loop)
    timed_out = False

    def expire() -> None:
        nonlocal timed_out
        timed_out = True
        _kill_group(process.pid)

    deadline = loop.call_later(time_limit, expire)
    try:
        await _exited(process, loop)
        deadline.cancel()
        if not output.ended.done():
            grace = loop.call_later(drain_grace, output.close)
            try:
                await output.ended
            finally:
                grace.cancel()
    except BaseException:
        # The request was cancelled (client gone, daemon stopping): leave nothing running.
        _kill_group(process.pid)
        deadline.cancel()
        output.close()
        raise
    finally:
        groups.discard(process.pid)
    assert process.returncode is not None
    return ExecResult(
        exit_code=TIMEOUT_EXIT_CODE if timed_out else _exit_code(process.returncode),
        output=output.kept.decode("utf-8", errors="replace"),
        truncated=output.truncated,
        timed_out=timed_out,
        duration_ms=(time.monotonic() - started) * 1000,
    )
