"""Workspace snapshots (DESIGN.md section 4): a thread's git worktree saved to the NATS object
store at each turn boundary and restored into a recreated sandbox, so recreation never silently
loses work.

The capture and the rebuild run inside the sandbox (``snapshot.sh``: POSIX sh, git, GNU tar),
reached only through deepagents' ``SandboxBackendProtocol`` async methods, so any sandbox
backend works. Not captured: stashes, tags, notes, an in-progress merge or rebase (a save with
unmerged paths is refused), repository-local configuration other than remotes and branch
upstreams, nested repositories and ignored files.
"""

from drydock.sandbox.snapshots.errors import SnapshotCorrupt, SnapshotError
from drydock.sandbox.snapshots.records import SnapshotInfo
from drydock.sandbox.snapshots.store import SnapshotStore

__all__ = ["SnapshotCorrupt", "SnapshotError", "SnapshotInfo", "SnapshotStore"]
