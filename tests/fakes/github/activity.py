"""The fake GitHub's conversation state: issues and pull requests, their comments, reactions,
check runs, and organization members. Kept beside :class:`GithubState` (one per fake) and
reached with :func:`activity_of`, so the state module stays as its owner wrote it."""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from tests.fakes.github.state import GithubState

_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)

CommentKind = Literal["issue_comment", "review_comment"]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Issue:
    repository: str
    number: int
    pull_request: bool = False


@dataclass
class Comment:
    id: int
    repository: str
    number: int
    body: str
    login: str
    kind: CommentKind
    in_reply_to: int | None = None
    created_at: str = field(default_factory=now)

    @property
    def rendered(self) -> str:
        """The body as GitHub shows it: HTML comments (Drydock's effect markers) are not rendered."""
        return _HTML_COMMENT.sub("", self.body).rstrip()


@dataclass
class Reaction:
    id: int
    target: str
    """``issue_comment:<id>``, ``review_comment:<id>`` or ``issue:<owner/name>#<number>``."""
    content: str
    login: str


@dataclass
class CheckRun:
    id: int
    repository: str
    name: str
    head_sha: str
    status: str
    conclusion: str | None
    output: dict[str, Any]
    login: str
    started_at: str = field(default_factory=now)
    completed_at: str | None = None


class Activity:
    def __init__(self, github: GithubState) -> None:
        self._github = github
        self.issues: dict[tuple[str, int], Issue] = {}
        self.comments: dict[int, Comment] = {}
        self.reactions: list[Reaction] = []
        self.check_runs: dict[int, CheckRun] = {}
        self.org_members: dict[str, set[str]] = {}

    def next_id(self) -> int:
        return self._github.next_id()

    def open_issue(self, full_name: str, number: int, *, pull_request: bool = False) -> Issue:
        """An issue (or pull request) that exists on GitHub, so comments and reactions can reach it."""
        self._github.repository(full_name)
        found = Issue(full_name.lower(), number, pull_request)
        self.issues[(full_name.lower(), number)] = found
        return found

    def issue(self, full_name: str, number: int) -> Issue | None:
        return self.issues.get((full_name.lower(), number))

    def add_comment(
        self, full_name: str, number: int, body: str, *, login: str, kind: CommentKind = "issue_comment",
        comment_id: int | None = None, in_reply_to: int | None = None,
    ) -> Comment:  # fmt: skip
        """A comment someone wrote (the one a webhook is about)."""
        if self.issue(full_name, number) is None:
            self.open_issue(full_name, number, pull_request=kind == "review_comment")
        comment = Comment(
            comment_id if comment_id is not None else self.next_id(),
            full_name.lower(),
            number,
            body,
            login,
            kind,
            in_reply_to,
        )
        self.comments[comment.id] = comment
        return comment

    def add_member(self, org: str, login: str) -> None:
        self.org_members.setdefault(org.lower(), set()).add(login.lower())

    def comments_on(self, full_name: str, number: int) -> list[Comment]:
        return [c for c in self.comments.values() if c.repository == full_name.lower() and c.number == number]

    def reactions_to(self, target: str) -> list[Reaction]:
        return [reaction for reaction in self.reactions if reaction.target == target]


_ACTIVITIES: weakref.WeakKeyDictionary[GithubState, Activity] = weakref.WeakKeyDictionary()


def activity_of(github: GithubState) -> Activity:
    """The conversation state of one fake GitHub."""
    found = _ACTIVITIES.get(github)
    if found is None:
        found = _ACTIVITIES[github] = Activity(github)
    return found
