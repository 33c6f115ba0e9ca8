"""What autofix asks GitHub, as the App's installation on each repository: a pull request's
state, the failing checks of a revision, its reviews and review comments, who made a commit, a
person's permission; and what it
says there: the loop-limit comment and neutral check, reactions to override commands.

Reads and writes go through :class:`~drydock.github.GithubClient` as the App's installation.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from drydock.github import GithubClient

CHECK_RUNS = 1000
"""At most this many check runs are read per revision."""
FEEDBACK = 300
"""At most this many reviews, and as many review comments, per pull request."""
_COMMIT_CACHE = 4096


@dataclass(frozen=True)
class PullView:
    number: int
    state: str
    merged: bool
    head_sha: str
    head_ref: str
    base_ref: str
    mergeable: bool | None
    labels: frozenset[str]

    @property
    def open(self) -> bool:
        return self.state == "open"


@dataclass(frozen=True)
class CommitView:
    sha: str
    author_email: str
    committer_email: str
    author_login: str | None
    committer_login: str | None


def pull_view(raw: dict[str, Any]) -> PullView:
    """A pull request object of the REST API or of a webhook payload."""
    head, base = raw.get("head") or {}, raw.get("base") or {}
    mergeable = raw.get("mergeable")
    return PullView(
        number=int(raw["number"]),
        state=str(raw.get("state") or "open"),
        merged=bool(raw.get("merged") or raw.get("merged_at")),
        head_sha=str(head.get("sha") or ""),
        head_ref=str(head.get("ref") or ""),
        base_ref=str(base.get("ref") or ""),
        mergeable=mergeable if isinstance(mergeable, bool) else None,
        labels=frozenset(str(label.get("name")) for label in raw.get("labels") or [] if isinstance(label, dict)),
    )


def failing(check_runs: Iterable[dict[str, Any]], conclusions: Iterable[str]) -> frozenset[str]:
    """Names whose latest completed run ended in one of ``conclusions``."""
    wanted = set(conclusions)
    latest: dict[str, tuple[str, int, str | None]] = {}
    for run in check_runs:
        if run.get("status") != "completed":
            continue
        name = str(run.get("name") or "")
        moment = (str(run.get("completed_at") or ""), int(run.get("id") or 0), run.get("conclusion"))
        if name not in latest or moment[:2] > latest[name][:2]:
            latest[name] = moment
    return frozenset(name for name, (_, _, conclusion) in latest.items() if conclusion in wanted)


class AutofixGithub:
    def __init__(self, client: GithubClient) -> None:
        self.client = client
        self._commits: OrderedDict[tuple[str, str], CommitView] = OrderedDict()

    async def pull(self, repository: str, number: int) -> PullView:
        authorization = await self.client.app_authorization(repository)
        return pull_view(await self.client.get_pull(authorization, repository, number))

    async def check_runs(self, repository: str, ref: str) -> list[dict[str, Any]]:
        """The latest check run of each name on ``ref`` (a sha or a branch)."""
        authorization = await self.client.app_authorization(repository)
        return await self.client.list_check_runs(authorization, repository, ref, limit=CHECK_RUNS)

    async def reviews(self, repository: str, number: int) -> list[dict[str, Any]]:
        """The pull request's reviews, oldest first."""
        authorization = await self.client.app_authorization(repository)
        return await self.client.list_reviews(authorization, repository, number, limit=FEEDBACK)

    async def review_comments(self, repository: str, number: int) -> list[dict[str, Any]]:
        """The pull request's review comments (thread starts and replies), oldest first."""
        authorization = await self.client.app_authorization(repository)
        return await self.client.list_review_comments(authorization, repository, number, limit=FEEDBACK)

    async def failing_checks(self, repository: str, ref: str, conclusions: Iterable[str]) -> frozenset[str]:
        return failing(await self.check_runs(repository, ref), conclusions)

    async def commit(self, repository: str, sha: str) -> CommitView:
        """Who authored and committed ``sha`` (cached: a commit never changes)."""
        cached = self._commits.get((repository.lower(), sha))
        if cached is not None:
            return cached
        body = await self.client.get_commit(await self.client.app_authorization(repository), repository, sha)
        commit = body.get("commit") or {}
        found = CommitView(
            sha=sha,
            author_email=str((commit.get("author") or {}).get("email") or ""),
            committer_email=str((commit.get("committer") or {}).get("email") or ""),
            author_login=(body.get("author") or {}).get("login"),
            committer_login=(body.get("committer") or {}).get("login"),
        )
        self._commits[(repository.lower(), sha)] = found
        while len(self._commits) > _COMMIT_CACHE:
            self._commits.popitem(last=False)
        return found

    async def permission(self, repository: str, login: str) -> str:
        """``admin``, ``maintain``, ``write``, ``triage``, ``read`` or ``none``."""
        authorization = await self.client.app_authorization(repository)
        return await self.client.collaborator_permission(authorization, repository, login)

    async def comment(self, repository: str, number: int, body: str) -> None:
        await self.client.post_comment(None, repository, number, body)

    async def neutral_check(self, repository: str, head_sha: str, *, title: str, summary: str) -> None:
        await self.client.create_check_run(
            None,
            repository,
            name="Drydock autofix",
            head_sha=head_sha,
            status="completed",
            conclusion="neutral",
            title=title,
            summary=summary,
        )

    async def react(self, repository: str, comment_id: int, content: str) -> None:
        await self.client.react(None, repository, "issue_comment", comment_id, content)


WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
