"""Which review feedback on a pull request is still unanswered, from what GitHub lists: the
reviews (``GET …/pulls/{n}/reviews``) and the review comments (``GET …/pulls/{n}/comments``).

Feedback counts when a person (not a bot) wrote it and nothing answered it yet:

- a review requesting changes, submitted on the current head (a later push answers it);
- a review comment starting a thread, made on the current head, with no reply by the agent in
  its thread.

The monitor turns the newest of these into a review signal, as the missed webhook would have.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Feedback:
    actor: str
    url: str
    at: str
    """When it was written (ISO 8601), to order feedback newest first."""


def _person(user: Any) -> str | None:
    if not isinstance(user, dict) or user.get("type") == "Bot":
        return None
    login = user.get("login")
    return str(login) if login else None


def unanswered(
    reviews: Iterable[dict[str, Any]],
    comments: Iterable[dict[str, Any]],
    *,
    head_sha: str,
    agent_login: str | None,
) -> list[Feedback]:
    """People's feedback on ``head_sha`` that the agent has not answered, newest first.
    ``agent_login`` is the App's bot login; without it any bot's reply counts as the agent's."""
    comments = list(comments)
    answered: set[int] = set()
    for comment in comments:
        root, user = comment.get("in_reply_to_id"), comment.get("user")
        if not isinstance(root, int) or not isinstance(user, dict):
            continue
        login = str(user.get("login") or "").lower()
        if (login == agent_login) if agent_login else user.get("type") == "Bot":
            answered.add(root)
    found: list[Feedback] = []
    for review in reviews:
        actor = _person(review.get("user"))
        if actor is None or str(review.get("state", "")).upper() != "CHANGES_REQUESTED":
            continue
        if review.get("commit_id") != head_sha:
            continue
        found.append(Feedback(actor, str(review.get("html_url") or ""), str(review.get("submitted_at") or "")))
    for comment in comments:
        actor = _person(comment.get("user"))
        if actor is None or comment.get("in_reply_to_id") is not None or comment.get("id") in answered:
            continue
        if comment.get("original_commit_id", head_sha) != head_sha:
            continue
        found.append(Feedback(actor, str(comment.get("html_url") or ""), str(comment.get("created_at") or "")))
    return sorted(found, key=lambda feedback: feedback.at, reverse=True)
