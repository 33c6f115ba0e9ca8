"""What the object store holds per thread: snapshot records and the thread's index of them.

Objects are named ``{thread_id}/index`` (the index) and ``{thread_id}/{seq}`` (one archive each).
Sequence numbers only grow, so an archive stored by a save that crashed before its index was
written is overwritten by the next save instead of lingering.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


def check_thread_id(thread_id: str) -> str:
    """The thread id, or :class:`ValueError` if it is not a canonical uuid (it becomes an object name)."""
    try:
        canonical = str(uuid.UUID(thread_id))
    except (ValueError, TypeError, AttributeError):
        raise ValueError(f"invalid thread id {thread_id!r}: expected a uuid") from None
    if canonical != thread_id:
        raise ValueError(f"invalid thread id {thread_id!r}: expected the canonical form {canonical}")
    return thread_id


def index_name(thread_id: str) -> str:
    return f"{thread_id}/index"


def archive_name(thread_id: str, seq: int) -> str:
    return f"{thread_id}/{seq:012d}"


class SnapshotInfo(BaseModel):
    """One stored snapshot of a thread's worktree."""

    model_config = ConfigDict(frozen=True)

    thread_id: str
    repo_dir: str = Field(description="Where the repository was, absolute or relative to the sandbox's workspace.")
    seq: int = Field(ge=0, description="Grows by one per stored snapshot of the thread.")
    size: int = Field(ge=0, description="Bytes of the archive.")
    sha256: str = Field(description="Hex digest of the archive.")
    fingerprint: str = Field(description="Worktree and remote-tracking refs; equal means nothing to save.")
    state: str = Field(description="Worktree alone; a restore must reproduce it exactly.")
    head: str | None = Field(description="The commit checked out; None on an unborn branch.")
    branch: str | None = Field(description="The branch checked out (refs/heads/...); None when detached.")
    created_at: datetime

    @property
    def name(self) -> str:
        """The archive's object name."""
        return archive_name(self.thread_id, self.seq)


class SnapshotIndex(BaseModel):
    """A thread's snapshots, oldest first, and the next sequence number."""

    version: Literal[1] = 1
    next_seq: int = Field(default=0, ge=0)
    snapshots: list[SnapshotInfo] = Field(default_factory=list)
