"""GitHub webhook payloads in GitHub's shapes (the fields consumers read, with GitHub's
names, types and nesting), for the events the ingress routes."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

_ids = itertools.count(1_000_000)

HTML = "https://github.com"
API = "https://api.github.com"


def next_id() -> int:
    return next(_ids)


def now() -> str:
    """The current time as GitHub writes it: whole seconds, UTC."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def user(login: str, user_id: int | None = None, *, kind: str = "User") -> dict[str, Any]:
    """A ``user`` object; ``kind`` is ``User``, ``Bot`` or ``Organization``."""
    uid = user_id if user_id is not None else next_id()
    return {
        "login": login,
        "id": uid,
        "node_id": f"U_{uid}",
        "type": kind,
        "site_admin": False,
        "html_url": f"{HTML}/{login}",
        "url": f"{API}/users/{login}",
    }


def repository(owner: str, name: str, *, private: bool = True) -> dict[str, Any]:
    rid = next_id()
    return {
        "id": rid,
        "node_id": f"R_{rid}",
        "name": name,
        "full_name": f"{owner}/{name}",
        "private": private,
        "owner": user(owner, kind="Organization"),
        "html_url": f"{HTML}/{owner}/{name}",
        "url": f"{API}/repos/{owner}/{name}",
        "default_branch": "main",
    }


def _envelope(
    action: str | None, owner: str, name: str, sender: dict[str, Any], installation_id: int | None
) -> dict[str, Any]:
    payload: dict[str, Any] = {"repository": repository(owner, name), "sender": sender}
    if action is not None:
        payload["action"] = action
    if installation_id is not None:
        payload["installation"] = {
            "id": installation_id,
            "node_id": f"MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u{installation_id}",
        }
    return payload


def issue(
    owner: str,
    name: str,
    number: int,
    *,
    author: dict[str, Any],
    title: str = "An issue",
    body: str = "",
    pull_request: bool = False,
    association: str = "MEMBER",
) -> dict[str, Any]:
    found: dict[str, Any] = {
        "id": next_id(),
        "number": number,
        "title": title,
        "body": body,
        "user": author,
        "state": "open",
        "author_association": association,
        "html_url": f"{HTML}/{owner}/{name}/{'pull' if pull_request else 'issues'}/{number}",
        "url": f"{API}/repos/{owner}/{name}/issues/{number}",
        "comments": 0,
        "labels": [],
        "created_at": now(),
    }
    if pull_request:
        found["pull_request"] = {
            "url": f"{API}/repos/{owner}/{name}/pulls/{number}",
            "html_url": f"{HTML}/{owner}/{name}/pull/{number}",
            "diff_url": f"{HTML}/{owner}/{name}/pull/{number}.diff",
            "patch_url": f"{HTML}/{owner}/{name}/pull/{number}.patch",
            "merged_at": None,
        }
    return found


def issue_comment(
    owner: str,
    name: str,
    number: int,
    body: str,
    *,
    author: dict[str, Any] | None = None,
    association: str = "MEMBER",
    pull_request: bool = False,
    comment_id: int | None = None,
    installation_id: int | None = 42,
    action: str = "created",
) -> dict[str, Any]:
    """``issue_comment``: a comment on an issue or (``pull_request``) a pull request."""
    commenter = author or user("octocat")
    cid = comment_id if comment_id is not None else next_id()
    payload = _envelope(action, owner, name, commenter, installation_id)
    payload["issue"] = issue(owner, name, number, author=user("reporter"), pull_request=pull_request)
    payload["comment"] = {
        "id": cid,
        "node_id": f"IC_{cid}",
        "body": body,
        "user": commenter,
        "author_association": association,
        "html_url": f"{HTML}/{owner}/{name}/issues/{number}#issuecomment-{cid}",
        "url": f"{API}/repos/{owner}/{name}/issues/comments/{cid}",
        "issue_url": f"{API}/repos/{owner}/{name}/issues/{number}",
        "created_at": now(),
        "updated_at": now(),
    }
    return payload


def issues_opened(
    owner: str,
    name: str,
    number: int,
    title: str,
    body: str,
    *,
    author: dict[str, Any] | None = None,
    association: str = "MEMBER",
    installation_id: int | None = 42,
) -> dict[str, Any]:
    opener = author or user("octocat")
    payload = _envelope("opened", owner, name, opener, installation_id)
    payload["issue"] = issue(owner, name, number, author=opener, title=title, body=body, association=association)
    return payload


def pull_request_object(
    owner: str,
    name: str,
    number: int,
    *,
    author: dict[str, Any],
    head_ref: str,
    head_sha: str,
    title: str = "A change",
    draft: bool = False,
    association: str = "MEMBER",
) -> dict[str, Any]:
    return {
        "id": next_id(),
        "number": number,
        "state": "open",
        "title": title,
        "body": "",
        "draft": draft,
        "merged": False,
        "user": author,
        "author_association": association,
        "html_url": f"{HTML}/{owner}/{name}/pull/{number}",
        "url": f"{API}/repos/{owner}/{name}/pulls/{number}",
        "head": {"ref": head_ref, "sha": head_sha, "label": f"{owner}:{head_ref}", "repo": repository(owner, name)},
        "base": {"ref": "main", "sha": "0" * 40, "label": f"{owner}:main", "repo": repository(owner, name)},
    }


def pull_request(
    owner: str,
    name: str,
    number: int,
    action: str,
    *,
    author: dict[str, Any] | None = None,
    head_ref: str = "feature",
    head_sha: str = "a" * 40,
    draft: bool = False,
    association: str = "MEMBER",
    title: str = "A change",
    installation_id: int | None = 42,
) -> dict[str, Any]:
    """``pull_request`` with ``action`` (opened, synchronize, ready_for_review, closed, …)."""
    opener = author or user("octocat")
    payload = _envelope(action, owner, name, opener, installation_id)
    payload["number"] = number
    payload["pull_request"] = pull_request_object(
        owner,
        name,
        number,
        author=opener,
        head_ref=head_ref,
        head_sha=head_sha,
        title=title,
        draft=draft,
        association=association,
    )
    if action == "synchronize":
        payload["before"], payload["after"] = "b" * 40, head_sha
    return payload


def review_comment(
    owner: str,
    name: str,
    number: int,
    body: str,
    *,
    author: dict[str, Any] | None = None,
    head_ref: str = "feature",
    association: str = "MEMBER",
    comment_id: int | None = None,
    in_reply_to: int | None = None,
    installation_id: int | None = 42,
    head_sha: str = "c" * 40,
) -> dict[str, Any]:
    """``pull_request_review_comment`` (a comment on a line of the diff)."""
    commenter = author or user("octocat")
    cid = comment_id if comment_id is not None else next_id()
    payload = _envelope("created", owner, name, commenter, installation_id)
    payload["pull_request"] = pull_request_object(
        owner, name, number, author=user("someone"), head_ref=head_ref, head_sha=head_sha
    )
    payload["comment"] = {
        "id": cid,
        "node_id": f"PRRC_{cid}",
        "pull_request_review_id": next_id(),
        "body": body,
        "path": "src/app.py",
        "line": 12,
        "side": "RIGHT",
        "diff_hunk": "@@ -10,3 +10,4 @@",
        "commit_id": head_sha,
        "user": commenter,
        "author_association": association,
        "html_url": f"{HTML}/{owner}/{name}/pull/{number}#discussion_r{cid}",
        "url": f"{API}/repos/{owner}/{name}/pulls/comments/{cid}",
        "created_at": now(),
    }
    if in_reply_to is not None:
        payload["comment"]["in_reply_to_id"] = in_reply_to
    return payload


def review(
    owner: str,
    name: str,
    number: int,
    body: str | None,
    *,
    author: dict[str, Any] | None = None,
    state: str = "commented",
    head_ref: str = "feature",
    association: str = "MEMBER",
    installation_id: int | None = 42,
    head_sha: str = "d" * 40,
) -> dict[str, Any]:
    """``pull_request_review`` submitted."""
    reviewer = author or user("octocat")
    payload = _envelope("submitted", owner, name, reviewer, installation_id)
    payload["pull_request"] = pull_request_object(
        owner, name, number, author=user("someone"), head_ref=head_ref, head_sha=head_sha
    )
    rid = next_id()
    payload["review"] = {
        "id": rid,
        "node_id": f"PRR_{rid}",
        "body": body,
        "state": state,
        "user": reviewer,
        "author_association": association,
        "commit_id": head_sha,
        "html_url": f"{HTML}/{owner}/{name}/pull/{number}#pullrequestreview-{rid}",
        "submitted_at": now(),
    }
    return payload


def push(
    owner: str,
    name: str,
    branch: str,
    *,
    pusher: dict[str, Any] | None = None,
    commits: int = 1,
    head_sha: str = "e" * 40,
    deleted: bool = False,
    installation_id: int | None = 42,
) -> dict[str, Any]:
    sender = pusher or user("octocat")
    payload = _envelope(None, owner, name, sender, installation_id)
    payload.update(
        {
            "ref": f"refs/heads/{branch}",
            "before": "f" * 40,
            "after": "0" * 40 if deleted else head_sha,
            "created": False,
            "deleted": deleted,
            "forced": False,
            "pusher": {"name": sender["login"], "email": f"{sender['login']}@example.com"},
            "commits": [
                {"id": f"{i:040x}", "message": f"commit {i}", "distinct": True, "author": {"name": sender["login"]}}
                for i in range(commits)
            ],
        }
    )
    return payload


def check_run(
    owner: str,
    name: str,
    *,
    action: str = "completed",
    conclusion: str | None = "failure",
    head_sha: str = "a" * 40,
    pull_numbers: tuple[int, ...] = (),
    installation_id: int | None = 42,
    check_name: str = "tests",
    head_branch: str | None = None,
) -> dict[str, Any]:
    """``check_run`` (completed with a conclusion by default)."""
    payload = _envelope(action, owner, name, user("github-actions[bot]", kind="Bot"), installation_id)
    cid = next_id()
    payload["check_run"] = {
        "id": cid,
        "name": check_name,
        "head_sha": head_sha,
        "status": "completed" if action == "completed" else "queued",
        "conclusion": conclusion if action == "completed" else None,
        "html_url": f"{HTML}/{owner}/{name}/runs/{cid}",
        "pull_requests": [{"number": n, "head": {"sha": head_sha}, "base": {"ref": "main"}} for n in pull_numbers],
        "app": {"id": 15368, "slug": "github-actions", "name": "GitHub Actions"},
        "check_suite": {"id": next_id(), "head_branch": head_branch, "head_sha": head_sha},
    }
    return payload


def check_suite(
    owner: str,
    name: str,
    *,
    conclusion: str | None = "failure",
    head_sha: str = "a" * 40,
    head_branch: str | None = None,
    pull_numbers: tuple[int, ...] = (),
    installation_id: int | None = 42,
) -> dict[str, Any]:
    """``check_suite`` completed: every check run of one App on a commit finished."""
    payload = _envelope("completed", owner, name, user("github-actions[bot]", kind="Bot"), installation_id)
    sid = next_id()
    payload["check_suite"] = {
        "id": sid,
        "node_id": f"CS_{sid}",
        "head_branch": head_branch,
        "head_sha": head_sha,
        "status": "completed",
        "conclusion": conclusion,
        "pull_requests": [{"number": n, "head": {"sha": head_sha}, "base": {"ref": "main"}} for n in pull_numbers],
        "app": {"id": 15368, "slug": "github-actions", "name": "GitHub Actions"},
        "head_commit": {"id": head_sha, "message": "a commit"},
    }
    return payload


def workflow_run(
    owner: str,
    name: str,
    *,
    workflow: str = "CI",
    conclusion: str | None = "failure",
    head_sha: str = "a" * 40,
    head_branch: str = "feature",
    pull_numbers: tuple[int, ...] = (),
    installation_id: int | None = 42,
) -> dict[str, Any]:
    """``workflow_run`` completed (a GitHub Actions workflow)."""
    payload = _envelope("completed", owner, name, user("octocat"), installation_id)
    rid = next_id()
    payload["workflow_run"] = {
        "id": rid,
        "name": workflow,
        "head_branch": head_branch,
        "head_sha": head_sha,
        "status": "completed",
        "conclusion": conclusion,
        "event": "pull_request",
        "html_url": f"{HTML}/{owner}/{name}/actions/runs/{rid}",
        "pull_requests": [{"number": n, "head": {"sha": head_sha}, "base": {"ref": "main"}} for n in pull_numbers],
    }
    return payload


def labeled(
    owner: str,
    name: str,
    number: int,
    label: str,
    *,
    action: str = "labeled",
    sender: dict[str, Any] | None = None,
    head_ref: str = "feature",
    head_sha: str = "a" * 40,
    installation_id: int | None = 42,
) -> dict[str, Any]:
    """``pull_request`` labeled or unlabeled."""
    payload = pull_request(
        owner,
        name,
        number,
        action,
        author=sender,
        head_ref=head_ref,
        head_sha=head_sha,
        installation_id=installation_id,
    )
    payload["label"] = {"id": next_id(), "name": label, "color": "ededed", "default": False}
    payload["pull_request"]["labels"] = [payload["label"]] if action == "labeled" else []
    return payload


def ping(hook_id: int = 517355620) -> dict[str, Any]:
    return {
        "zen": "Keep it logically awesome.",
        "hook_id": hook_id,
        "hook": {"type": "App", "id": hook_id, "active": True},
    }
