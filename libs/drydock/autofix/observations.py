"""What an event on ``drydock.github.{event}`` tells autofix, read from GitHub's payload. Pure.

- ``check_run``, ``check_suite``, ``workflow_run`` completed with a failing conclusion →
  :class:`CheckFailure` (pull request numbers from the payload, else its head branch);
- ``pull_request`` → :class:`PullRequestChange` (closed, reopened, labels, mergeability);
- ``pull_request_review`` requesting changes, ``pull_request_review_comment`` created →
  :class:`ReviewFeedback`;
- ``issue_comment`` on a pull request → :class:`OverrideCommand` (the ingress forwards only
  comments shaped like ``@handle autofix on|off``).

Anything else, or a payload missing what the reading needs, is ``None``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from drydock.autofix.github import PullView, pull_view
from drydock.bus.envelopes import GithubEvent

CI_EVENTS = {"check_run": "check_run", "check_suite": "check_suite", "workflow_run": "workflow_run"}
"""Event name → the payload key of its object."""


@dataclass(frozen=True)
class CheckFailure:
    delivery_id: str
    repository: str
    head_sha: str
    head_branch: str | None
    numbers: tuple[int, ...]
    """Pull requests of the same repository the payload names (may be empty)."""
    name: str
    conclusion: str
    url: str


@dataclass(frozen=True)
class PullRequestChange:
    delivery_id: str
    repository: str
    action: str
    pull: PullView
    sender: str
    label: str | None = None


@dataclass(frozen=True)
class ReviewFeedback:
    delivery_id: str
    repository: str
    number: int
    head_sha: str
    head_branch: str
    actor: str
    bot: bool
    url: str


@dataclass(frozen=True)
class OverrideCommand:
    delivery_id: str
    repository: str
    number: int
    text: str
    actor: str
    bot: bool
    comment_id: int


Observation = CheckFailure | PullRequestChange | ReviewFeedback | OverrideCommand


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _is_bot(user: dict[str, Any]) -> bool:
    return user.get("type") == "Bot" or str(user.get("login", "")).lower().endswith("[bot]")


def _ci(event: GithubEvent, failures: Collection[str]) -> CheckFailure | None:
    if event.action != "completed":
        return None
    item = _obj(event.payload.get(CI_EVENTS[event.event]))
    conclusion = item.get("conclusion")
    head_sha = item.get("head_sha")
    if conclusion not in failures or not isinstance(head_sha, str) or not head_sha:
        return None
    suite = _obj(item.get("check_suite"))
    branch = item.get("head_branch") or suite.get("head_branch")
    numbers = tuple(
        int(pull["number"])
        for pull in item.get("pull_requests") or []
        if isinstance(pull, dict) and isinstance(pull.get("number"), int)
    )
    name = str(item.get("name") or _obj(item.get("app")).get("name") or event.event)
    return CheckFailure(
        delivery_id=event.delivery_id,
        repository=event.repository,
        head_sha=head_sha,
        head_branch=branch if isinstance(branch, str) and branch else None,
        numbers=numbers,
        name=name,
        conclusion=str(conclusion),
        url=str(item.get("html_url") or ""),
    )


def _pull_request(event: GithubEvent) -> PullRequestChange | None:
    raw = _obj(event.payload.get("pull_request"))
    if not isinstance(raw.get("number"), int):
        return None
    label = _obj(event.payload.get("label")).get("name")
    return PullRequestChange(
        delivery_id=event.delivery_id,
        repository=event.repository,
        action=event.action or "",
        pull=pull_view(raw),
        sender=str(_obj(event.payload.get("sender")).get("login") or ""),
        label=label if isinstance(label, str) else None,
    )


def _review(event: GithubEvent) -> ReviewFeedback | None:
    if event.event == "pull_request_review":
        item = _obj(event.payload.get("review"))
        if event.action != "submitted" or str(item.get("state", "")).lower() != "changes_requested":
            return None
    else:
        item = _obj(event.payload.get("comment"))
        if event.action != "created":
            return None
    pull, user = _obj(event.payload.get("pull_request")), _obj(item.get("user"))
    head = _obj(pull.get("head"))
    if not isinstance(pull.get("number"), int) or not head.get("sha") or not user.get("login"):
        return None
    return ReviewFeedback(
        delivery_id=event.delivery_id,
        repository=event.repository,
        number=int(pull["number"]),
        head_sha=str(head["sha"]),
        head_branch=str(head.get("ref") or ""),
        actor=str(user["login"]),
        bot=_is_bot(user),
        url=str(item.get("html_url") or ""),
    )


def _comment(event: GithubEvent) -> OverrideCommand | None:
    issue, comment = _obj(event.payload.get("issue")), _obj(event.payload.get("comment"))
    user = _obj(comment.get("user"))
    if event.action != "created" or not issue.get("pull_request") or not isinstance(issue.get("number"), int):
        return None
    if not isinstance(comment.get("id"), int) or not user.get("login"):
        return None
    return OverrideCommand(
        delivery_id=event.delivery_id,
        repository=event.repository,
        number=int(issue["number"]),
        text=str(comment.get("body") or ""),
        actor=str(user["login"]),
        bot=_is_bot(user),
        comment_id=int(comment["id"]),
    )


def observe(event: GithubEvent, *, failures: Collection[str]) -> Observation | None:
    """What ``event`` tells autofix; ``failures`` are the conclusions that count as failing."""
    if event.event in CI_EVENTS:
        return _ci(event, failures)
    if event.event == "pull_request":
        return _pull_request(event)
    if event.event in {"pull_request_review", "pull_request_review_comment"}:
        return _review(event)
    if event.event == "issue_comment":
        return _comment(event)
    return None
