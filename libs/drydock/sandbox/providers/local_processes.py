"""Starting and stopping a local sandbox's processes (Linux ``/proc``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path


def spawn_daemon(
    argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, log: Path, token: str, listen_fd: int
) -> subprocess.Popen[bytes]:
    """Start the daemon in a session of its own, so that it outlives the worker that started it
    (like a pod) and is not hit by signals sent to the worker's process group. The token goes
    through a pipe on standard input: it is never in the daemon's environment or command line."""
    with log.open("ab") as output:
        process = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=output,
            stderr=subprocess.STDOUT,
            pass_fds=(listen_fd,),
            start_new_session=True,
        )
    assert process.stdin is not None
    with process.stdin:
        process.stdin.write(token.encode() + b"\n")
    return process


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, session id) of a live process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[3])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return ""


def is_running(pid: int, marker: str) -> bool:
    """Whether ``pid`` is alive (not a zombie) and its command line contains ``marker``
    (so a reused pid is not mistaken for the daemon)."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z" and marker in _cmdline(pid)


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _environment_has(pid: int, entry: bytes) -> bool:
    try:
        return entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False


def sandbox_ids_running_in(root: Path, variable: str) -> set[str]:
    """The sandbox ids (the value of ``variable``) in the environment of processes whose command
    line names a directory ``root/<id>``: daemons of ``root`` found without their records."""
    prefix = variable.encode() + b"="
    found: set[str] = set()
    for pid in _all_pids():
        try:
            environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        entry = next((entry for entry in environment if entry.startswith(prefix)), None)
        if entry is None:
            continue
        sandbox_id = entry[len(prefix) :].decode(errors="replace")
        if f"{root}/{sandbox_id}" in _cmdline(pid):
            found.add(sandbox_id)
    return found


def _sandbox_processes(leader: int, environment_entry: bytes) -> set[int]:
    """The leader, every process in its session or carrying ``environment_entry`` in its
    environment (which catches commands re-parented after their parent died, and bubblewrap's
    init, which lives on when bubblewrap itself is killed), and all their descendants."""
    table = {pid: stat for pid in _all_pids() if (stat := _stat(pid)) is not None and stat[0] != "Z"}
    found = {leader} if leader in table else set()
    found |= {pid for pid, (_, _, session) in table.items() if session == leader}
    found |= {pid for pid in table if _environment_has(pid, environment_entry)}
    grew = True
    while grew:
        children = {pid for pid, (_, parent, _) in table.items() if parent in found} - found
        found |= children
        grew = bool(children)
    return found


def kill_sandbox(leader: int, marker: str, environment_entry: str) -> None:
    """SIGKILL the daemon started as ``leader`` and every process of its sandbox.

    ``marker`` must be in the leader's command line, so a reused pid is never killed;
    ``environment_entry`` (``NAME=value``) is in the environment of every sandbox process the
    daemon started. With bubblewrap the sandbox's PID namespace dies with its init.
    """
    stat = _stat(leader)
    if stat is not None and stat[0] != "Z" and marker not in _cmdline(leader):
        leader = -1
    for _ in range(3):
        victims = _sandbox_processes(leader, environment_entry.encode())
        if not victims:
            return
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
