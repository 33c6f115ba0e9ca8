"""Where a thread's repository is checked out in its sandbox, as a run's preparation hands it to
the role's graph."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Checkout:
    """Where the thread's repository is checked out in its sandbox."""

    repository: str
    path: str
    default_branch: str | None = None
    instructions: str | None = None
    """The text of the repository's root ``AGENTS.md``, when it has one."""
