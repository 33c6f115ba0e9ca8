"""Capturing a worktree inside a sandbox into one archive (``snapshot.sh capture``)."""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass

from deepagents.backends.protocol import SandboxBackendProtocol

from drydock.sandbox.snapshots.errors import SnapshotError
from drydock.sandbox.snapshots.sandbox_script import ARCHIVE, download, remove_dir, run_script, scratch_dir


@dataclass(frozen=True)
class Captured:
    archive: bytes
    fingerprint: str
    state: str
    head: str | None
    branch: str | None


@dataclass(frozen=True)
class Unchanged:
    """The worktree and remote-tracking refs match the previous snapshot's fingerprint."""


@dataclass(frozen=True)
class TooLarge:
    size: int


def _optional(field: str) -> str | None:
    return None if field == "-" else field


async def capture(
    sandbox: SandboxBackendProtocol,
    repo_dir: str,
    *,
    max_bytes: int,
    previous_fingerprint: str | None,
    time_limit: int,
) -> Captured | Unchanged | TooLarge:
    """Capture the repository at ``repo_dir``; the archive is built and bounded in the sandbox, then downloaded."""
    scratch = scratch_dir(repo_dir)
    try:
        result = await run_script(
            sandbox, "capture", repo_dir, scratch, str(max_bytes), previous_fingerprint or "-", time_limit=time_limit
        )
        if result.status == "unchanged":
            return Unchanged()
        if result.status == "too-large" and len(result.fields) == 1:
            return TooLarge(size=_size(result.fields[0]))
        if result.status != "ready" or len(result.fields) != 6:
            raise SnapshotError(f"unexpected result from the snapshot script: {result.status} {result.fields}")
        fingerprint, state, reported, sha256, head, branch = result.fields
        # What the script reports is the sandbox's to write: the bound is checked here again.
        size = _size(reported)
        if size > max_bytes:
            return TooLarge(size=size)
        archive = await download(sandbox, posixpath.join(scratch, ARCHIVE))
        if len(archive) != size or hashlib.sha256(archive).hexdigest() != sha256:
            raise SnapshotError(
                f"the archive downloaded from sandbox {sandbox.id} is not the one built "
                f"({len(archive)} bytes, expected {size})"
            )
        return Captured(archive, fingerprint, state, _optional(head), _optional(branch))
    finally:
        await remove_dir(sandbox, scratch, time_limit=time_limit)


def _size(reported: str) -> int:
    if not reported.isascii() or not reported.isdigit() or len(reported) > 18:
        raise SnapshotError(f"the snapshot script reported a size that is not one: {reported[:40]!r}")
    return int(reported)
