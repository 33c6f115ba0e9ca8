"""Rebuilding a worktree inside a sandbox from an archive (``snapshot.sh rebuild``).

The script rebuilds the repository in a scratch directory, checks it against the recorded state,
and only then moves it to ``repo_dir``: a failed restore leaves ``repo_dir`` as it was.
"""

from __future__ import annotations

import posixpath

from deepagents.backends.protocol import SandboxBackendProtocol

from drydock.sandbox.snapshots.errors import SnapshotError
from drydock.sandbox.snapshots.sandbox_script import ARCHIVE, make_dir, remove_dir, run_script, scratch_dir, upload


async def rebuild(
    sandbox: SandboxBackendProtocol, repo_dir: str, archive: bytes, *, state: str, time_limit: int
) -> None:
    """Upload ``archive`` and rebuild the repository at ``repo_dir`` from it, exactly as recorded in ``state``."""
    scratch = scratch_dir(repo_dir)
    try:
        await make_dir(sandbox, scratch, time_limit=time_limit)
        await upload(sandbox, posixpath.join(scratch, ARCHIVE), archive)
        result = await run_script(sandbox, "rebuild", repo_dir, scratch, state, time_limit=time_limit)
        if result.status != "restored":
            raise SnapshotError(f"unexpected result from the snapshot script: {result.status} {result.fields}")
    finally:
        await remove_dir(sandbox, scratch, time_limit=time_limit)
