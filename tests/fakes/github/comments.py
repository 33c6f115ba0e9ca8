"""Comments: ``POST`` and ``GET /repos/{owner}/{repo}/issues/{number}/comments`` and replies in a review
comment's thread, ``POST /repos/{owner}/{repo}/pulls/{number}/comments/{id}/replies``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse

from tests.fakes.github.activity import Comment, activity_of
from tests.fakes.github.auth import installation_token, state
from tests.fakes.github.callers import app_of, body_field, bot_user, require
from tests.fakes.github.errors import not_found
from tests.fakes.github.pagination import paginate
from tests.fakes.github.state import InstallationToken

router = APIRouter()

CREATE_DOCS = "https://docs.github.com/rest/issues/comments#create-an-issue-comment"
LIST_DOCS = "https://docs.github.com/rest/issues/comments#list-issue-comments"
REPLY_DOCS = "https://docs.github.com/rest/pulls/comments#create-a-reply-for-a-review-comment"


def comment_json(comment: Comment, base_url: str, user: dict[str, Any]) -> dict[str, Any]:
    owner_repo = comment.repository
    shared = {
        "id": comment.id,
        "node_id": f"IC_{comment.id}",
        "body": comment.body,
        "user": user,
        "created_at": comment.created_at,
        "updated_at": comment.created_at,
        "author_association": "NONE",
        "performed_via_github_app": None,
    }
    if comment.kind == "review_comment":
        return shared | {
            "url": f"{base_url}/repos/{owner_repo}/pulls/comments/{comment.id}",
            "html_url": f"https://github.com/{owner_repo}/pull/{comment.number}#discussion_r{comment.id}",
            "pull_request_url": f"{base_url}/repos/{owner_repo}/pulls/{comment.number}",
            "in_reply_to_id": comment.in_reply_to,
        }
    return shared | {
        "url": f"{base_url}/repos/{owner_repo}/issues/comments/{comment.id}",
        "html_url": f"https://github.com/{owner_repo}/issues/{comment.number}#issuecomment-{comment.id}",
        "issue_url": f"{base_url}/repos/{owner_repo}/issues/{comment.number}",
    }


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


@router.post("/repos/{owner}/{repo}/issues/{number}/comments")
async def create_comment(
    owner: str,
    repo: str,
    number: int,
    request: Request,
    token: Annotated[InstallationToken, Depends(installation_token)],
    body: Annotated[dict[str, Any] | None, Body()] = None,
) -> JSONResponse:
    full_name = f"{owner}/{repo}"
    activity = activity_of(state(request))
    issue = activity.issue(full_name, number)
    require(request, token, full_name, "pull_requests" if issue and issue.pull_request else "issues", CREATE_DOCS)
    if issue is None:
        raise not_found(CREATE_DOCS)
    text = body_field(body, "body", CREATE_DOCS)
    bot = bot_user(app_of(request, token))
    comment = activity.add_comment(full_name, number, text, login=bot["login"])
    return JSONResponse(comment_json(comment, _base(request), bot), status_code=201)


def _author(login: str) -> dict[str, Any]:
    if login.endswith("[bot]"):
        return {"login": login, "id": 41898282, "node_id": f"BOT_{login}", "type": "Bot", "site_admin": False}
    return {
        "login": login,
        "id": abs(hash(login)) % 10**8,
        "node_id": f"U_{login}",
        "type": "User",
        "site_admin": False,
    }


@router.get("/repos/{owner}/{repo}/issues/{number}/comments")
async def list_comments(
    owner: str,
    repo: str,
    number: int,
    request: Request,
    token: Annotated[InstallationToken, Depends(installation_token)],
) -> JSONResponse:
    full_name = f"{owner}/{repo}"
    github = state(request)
    activity = activity_of(github)
    issue = activity.issue(full_name, number)
    permission = "pull_requests" if issue and issue.pull_request else "issues"
    if issue is None or not github.token_allows(token.token, full_name, permission=permission, level="read"):
        raise not_found(LIST_DOCS)
    issue_comments = sorted(
        (c for c in activity.comments_on(full_name, number) if c.kind == "issue_comment"), key=lambda c: c.id
    )
    page, headers = paginate(request, issue_comments)
    base = _base(request)
    return JSONResponse([comment_json(c, base, _author(c.login)) for c in page], headers=headers)


@router.post("/repos/{owner}/{repo}/pulls/{number}/comments/{comment_id}/replies")
async def reply_to_review_comment(
    owner: str,
    repo: str,
    number: int,
    comment_id: int,
    request: Request,
    token: Annotated[InstallationToken, Depends(installation_token)],
    body: Annotated[dict[str, Any] | None, Body()] = None,
) -> JSONResponse:
    full_name = f"{owner}/{repo}"
    require(request, token, full_name, "pull_requests", REPLY_DOCS)
    activity = activity_of(state(request))
    parent = activity.comments.get(comment_id)
    if parent is None or parent.kind != "review_comment" or parent.repository != full_name.lower():
        raise not_found(REPLY_DOCS)
    if parent.number != number:
        raise not_found(REPLY_DOCS)
    text = body_field(body, "body", REPLY_DOCS)
    bot = bot_user(app_of(request, token))
    comment = activity.add_comment(
        full_name, number, text, login=bot["login"], kind="review_comment", in_reply_to=parent.in_reply_to or parent.id
    )
    return JSONResponse(comment_json(comment, _base(request), bot), status_code=201)
