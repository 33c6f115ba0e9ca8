"""The fake GitHub's view of repository history and pull request state that CI and people
change: branch heads, commits (who authored and committed them), labels, collaborators'
permissions and pull request mergeability. Kept beside :class:`GithubState` like
:mod:`tests.fakes.github.activity` and reached with :func:`history_of`.

Tests play CI and people here: they move a branch (``set_branch``, or ``sync_from`` a real
bare repository), record a check run's result (``add_check_run``), label a pull request.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from tests.fakes.github.activity import CheckRun, activity_of, now
from tests.fakes.github.state import GithubState, PullRequest

ROLES = ("admin", "maintain", "write", "triage", "read")
"""Repository roles; the permission endpoint reports maintain as write and triage as read."""


@dataclass
class Commit:
    sha: str
    message: str
    author_name: str
    author_email: str
    committer_name: str
    committer_email: str
    author_login: str | None = None
    """The GitHub account matched to the author's e-mail, if any."""
    committer_login: str | None = None
    parents: list[str] = field(default_factory=list)
    date: str = field(default_factory=now)


class History:
    def __init__(self, github: GithubState) -> None:
        self._github = github
        self.branches: dict[tuple[str, str], str] = {}
        self.commits: dict[tuple[str, str], Commit] = {}
        self.labels: dict[tuple[str, int], list[str]] = {}
        self.permissions: dict[tuple[str, str], str] = {}
        self.mergeable: dict[tuple[str, int], bool | None] = {}

    def set_branch(self, full_name: str, branch: str, sha: str) -> None:
        self.branches[(full_name.lower(), branch)] = sha

    def branch_head(self, full_name: str, branch: str) -> str | None:
        return self.branches.get((full_name.lower(), branch))

    def resolve(self, full_name: str, ref: str) -> str:
        """A branch name's head, or ``ref`` itself (a sha)."""
        return self.branch_head(full_name, ref.removeprefix("refs/heads/").removeprefix("heads/")) or ref

    def head_sha(self, pull: PullRequest) -> str:
        return self.branch_head(pull.repository, pull.head_ref) or pull.head_sha

    def add_commit(self, full_name: str, commit: Commit) -> Commit:
        self.commits[(full_name.lower(), commit.sha)] = commit
        return commit

    def commit(self, full_name: str, sha: str) -> Commit | None:
        return self.commits.get((full_name.lower(), sha))

    def add_check_run(
        self, full_name: str, name: str, head_sha: str, conclusion: str | None, *, app: str = "github-actions"
    ) -> CheckRun:
        """A check run another App (CI) reported; ``conclusion=None`` leaves it in progress."""
        activity = activity_of(self._github)
        run = CheckRun(
            activity.next_id(),
            full_name.lower(),
            name,
            head_sha,
            "completed" if conclusion is not None else "in_progress",
            conclusion,
            {},
            f"{app}[bot]",
        )
        if conclusion is not None:
            run.completed_at = now()
        activity.check_runs[run.id] = run
        return run

    def check_runs(self, full_name: str, sha: str) -> list[CheckRun]:
        runs = activity_of(self._github).check_runs.values()
        return sorted(
            (run for run in runs if run.repository == full_name.lower() and run.head_sha == sha), key=lambda r: r.id
        )

    def set_permission(self, full_name: str, login: str, role: str) -> None:
        if role not in ROLES:
            raise ValueError(f"{role!r} is not one of {ROLES}")
        self.permissions[(full_name.lower(), login.lower())] = role

    def labels_of(self, full_name: str, number: int) -> list[str]:
        return self.labels.get((full_name.lower(), number), [])

    def set_mergeable(self, full_name: str, number: int, mergeable: bool | None) -> None:
        self.mergeable[(full_name.lower(), number)] = mergeable

    async def sync_from(self, full_name: str, bare: Path, env: dict[str, str]) -> dict[str, str]:
        """Take every branch head and its commit from the bare repository ``bare``, as GitHub
        knows them after a push; returns the branches."""
        out = await _git(
            env, "--git-dir", str(bare), "for-each-ref", "refs/heads",
            "--format=%(refname:short)%00%(objectname)%00%(authorname)%00%(authoremail:trim)%00%(committername)"
            "%00%(committeremail:trim)%00%(subject)",
        )  # fmt: skip
        found = {}
        for line in out.splitlines():
            branch, sha, author, author_email, committer, committer_email, subject = line.split("\0")
            self.set_branch(full_name, branch, sha)
            self.add_commit(full_name, Commit(sha, subject, author, author_email, committer, committer_email))
            found[branch] = sha
        return found


async def _git(env: dict[str, str], *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        "git", *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {err.decode(errors='replace')}")
    return out.decode()


_HISTORIES: weakref.WeakKeyDictionary[GithubState, History] = weakref.WeakKeyDictionary()


def history_of(github: GithubState) -> History:
    """The history state of one fake GitHub."""
    found = _HISTORIES.get(github)
    if found is None:
        found = _HISTORIES[github] = History(github)
    return found
