"""Running ``snapshot.sh`` in a sandbox and moving the archive in and out of it.

Everything goes through deepagents' ``SandboxBackendProtocol`` async methods, so any sandbox
backend works. The script reports one result line; a failure there becomes a snapshot error.
"""

from __future__ import annotations

import posixpath
import shlex
import uuid
from dataclasses import dataclass
from importlib import resources

import structlog
from deepagents.backends.protocol import ExecuteResponse, SandboxBackendProtocol

from drydock.errors import describe
from drydock.sandbox.snapshots.errors import SnapshotCorrupt, SnapshotError

log = structlog.get_logger(__name__)

SCRIPT = resources.files(__package__).joinpath("snapshot.sh").read_text(encoding="utf-8")
RESULT_PREFIX = "drydock-snapshot:"
ARCHIVE = "snapshot.tar"


def check_repo_dir(repo_dir: str) -> str:
    """The normalized repository path, or :class:`ValueError` if it cannot be one.

    Absolute, or relative to the directory the sandbox runs commands in (its workspace). A
    relative path survives recreation by a provider that puts the workspace somewhere else.
    """
    if not repo_dir or any(char in repo_dir for char in "\0\n"):
        raise ValueError(f"invalid repository directory {repo_dir!r}")
    normalized = posixpath.normpath(repo_dir)
    if ".." in normalized.split("/"):
        raise ValueError(f"invalid repository directory {repo_dir!r}: '..' is not allowed")
    if normalized in {".", "/", "//"}:
        raise ValueError(f"invalid repository directory {repo_dir!r}: it needs a directory of its own")
    return normalized


def scratch_dir(repo_dir: str) -> str:
    """A fresh working directory next to the repository: in the sandbox's workspace, on the same filesystem."""
    return posixpath.join(posixpath.dirname(repo_dir), f".drydock-snapshot-{uuid.uuid4().hex[:12]}")


@dataclass(frozen=True)
class Result:
    status: str
    fields: list[str]


def _tail(output: str, limit: int = 1500) -> str:
    output = output.strip()
    return output if len(output) <= limit else "…" + output[-limit:]


async def run_script(sandbox: SandboxBackendProtocol, *args: str, time_limit: int) -> Result:
    """Run ``snapshot.sh`` with ``args``; its ``error``/``corrupt`` results raise, others are returned."""
    response = await sandbox.aexecute(shlex.join(["sh", "-c", SCRIPT, "drydock-snapshot", *args]), timeout=time_limit)
    lines = [line for line in response.output.splitlines() if line.startswith(RESULT_PREFIX)]
    if not lines:
        raise SnapshotError(
            f"the snapshot script in sandbox {sandbox.id} gave no result "
            f"(exit code {response.exit_code}): {_tail(response.output)}"
        )
    status, _, rest = lines[-1].removeprefix(RESULT_PREFIX).strip().partition(" ")
    if status == "corrupt":
        raise SnapshotCorrupt(f"the snapshot is corrupt: {rest}")
    if status == "error":
        raise SnapshotError(rest)
    if response.exit_code != 0:
        raise SnapshotError(f"the snapshot script failed (exit code {response.exit_code}): {_tail(response.output)}")
    return Result(status, rest.split(" "))


async def _run(sandbox: SandboxBackendProtocol, command: list[str], *, time_limit: int) -> ExecuteResponse:
    return await sandbox.aexecute(shlex.join(command), timeout=time_limit)


async def make_dir(sandbox: SandboxBackendProtocol, path: str, *, time_limit: int) -> None:
    response = await _run(sandbox, ["mkdir", "-p", "--", path], time_limit=time_limit)
    if response.exit_code != 0:
        raise SnapshotError(f"cannot create {path} in sandbox {sandbox.id}: {_tail(response.output)}")


async def remove_dir(sandbox: SandboxBackendProtocol, path: str, *, time_limit: int) -> None:
    """Remove a scratch directory; a failure is logged, never raised (it must not hide the real outcome)."""
    try:
        response = await _run(sandbox, ["rm", "-rf", "--", path], time_limit=time_limit)
    except Exception as error:  # the sandbox may be gone; the outcome of the operation matters more
        log.warning("snapshot scratch not removed", sandbox=sandbox.id, path=path, error=describe(error))
        return
    if response.exit_code != 0:
        log.warning("snapshot scratch not removed", sandbox=sandbox.id, path=path, output=_tail(response.output))


async def download(sandbox: SandboxBackendProtocol, path: str) -> bytes:
    [response] = await sandbox.adownload_files([path])
    if response.error is not None or response.content is None:
        raise SnapshotError(f"cannot download {path} from sandbox {sandbox.id}: {response.error}")
    return response.content


async def upload(sandbox: SandboxBackendProtocol, path: str, content: bytes) -> None:
    [response] = await sandbox.aupload_files([(path, content)])
    if response.error is not None:
        raise SnapshotError(f"cannot upload {path} to sandbox {sandbox.id}: {response.error}")
