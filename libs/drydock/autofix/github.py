"""What autofix asks GitHub, as the App's installation on each repository: a pull request's
state, the failing checks of a revision, its reviews and review comments, who made a commit, a
person's permission; and what it
says there: the loop-limit comment and neutral check, reactions to override commands.

Reads go over their own connection pool (aiohttp) with the installation token of
:class:`~drydock.channels.github.client.GithubClient`; writes use that client's methods.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp

from drydock.channels.errors import OutboundFailed
from drydock.channels.github.client import API_VERSION, USER_AGENT, GithubClient
from drydock.config import GithubSettings
from drydock.credentials.user_tokens import app_authorization
from drydock.errors import describe

CHECK_PAGES = 10
"""At most this many pages of 100 check runs are read per revision."""
FEEDBACK_PAGES = 3
"""At most this many pages of 100 reviews, and of 100 review comments, per pull request."""
_COMMIT_CACHE = 4096
CONNECTIONS = 32


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
    def __init__(self, client: GithubClient, settings: GithubSettings) -> None:
        self.client = client
        self._api_url = settings.api_url.rstrip("/")
        # aiohttp, not httpx: reads are the controller's hot path, and an httpx request costs
        # about ten times the CPU (measured: bench/bench_autofix.py). Few connections, all kept.
        self._http = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=settings.request_timeout),
            connector=aiohttp.TCPConnector(limit=CONNECTIONS, ttl_dns_cache=300),
            headers={
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": USER_AGENT,
            },
        )
        self._commits: OrderedDict[tuple[str, str], CommitView] = OrderedDict()

    async def aclose(self) -> None:
        await self._http.close()

    async def _get(self, repository: str, path: str, params: dict[str, str] | None = None) -> Any:
        authorization = await app_authorization(self.client, repository)
        url = f"{self._api_url}{path}"
        try:
            async with self._http.get(url, params=params, headers={"Authorization": authorization}) as response:
                raw = await response.read()
                status, ok = response.status, response.ok
        except (aiohttp.ClientError, TimeoutError) as error:
            raise OutboundFailed(f"GitHub at {self._api_url} unreachable: {describe(error)}") from None
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        if not ok:
            message = body.get("message") if isinstance(body, dict) else raw[:200].decode(errors="replace")
            raise OutboundFailed(f"GitHub answered {status} {message!r} reading {path}", status=status)
        return body

    async def pull(self, repository: str, number: int) -> PullView:
        return pull_view(await self._get(repository, f"/repos/{repository}/pulls/{number}"))

    async def check_runs(self, repository: str, ref: str) -> list[dict[str, Any]]:
        """The latest check run of each name on ``ref`` (a sha or a branch)."""
        found: list[dict[str, Any]] = []
        for page in range(1, CHECK_PAGES + 1):
            body = await self._get(
                repository,
                f"/repos/{repository}/commits/{ref}/check-runs",
                {"filter": "latest", "per_page": "100", "page": str(page)},
            )
            runs = [run for run in body.get("check_runs") or [] if isinstance(run, dict)]
            found += runs
            if len(runs) < 100 or len(found) >= int(body.get("total_count") or 0):
                break
        return found

    async def _listed(self, repository: str, path: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for page in range(1, FEEDBACK_PAGES + 1):
            body = await self._get(repository, path, {"per_page": "100", "page": str(page)})
            items = [item for item in body or [] if isinstance(item, dict)]
            found += items
            if len(items) < 100:
                break
        return found

    async def reviews(self, repository: str, number: int) -> list[dict[str, Any]]:
        """The pull request's reviews, oldest first."""
        return await self._listed(repository, f"/repos/{repository}/pulls/{number}/reviews")

    async def review_comments(self, repository: str, number: int) -> list[dict[str, Any]]:
        """The pull request's review comments (thread starts and replies), oldest first."""
        return await self._listed(repository, f"/repos/{repository}/pulls/{number}/comments")

    async def failing_checks(self, repository: str, ref: str, conclusions: Iterable[str]) -> frozenset[str]:
        return failing(await self.check_runs(repository, ref), conclusions)

    async def commit(self, repository: str, sha: str) -> CommitView:
        """Who authored and committed ``sha`` (cached: a commit never changes)."""
        cached = self._commits.get((repository.lower(), sha))
        if cached is not None:
            return cached
        body = await self._get(repository, f"/repos/{repository}/commits/{sha}")
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
        try:
            body = await self._get(repository, f"/repos/{repository}/collaborators/{login}/permission")
        except OutboundFailed as failure:
            if failure.status == 404:
                return "none"
            raise
        return str(body.get("role_name") or body.get("permission") or "none")

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
