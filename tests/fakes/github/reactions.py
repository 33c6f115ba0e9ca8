"""Reactions: ``POST .../issues/comments/{id}/reactions``, ``.../pulls/comments/{id}/reactions``
and ``.../issues/{number}/reactions``. 201 for a new reaction, 200 when the caller already
reacted so (GitHub's idempotent answer), 422 for an unknown reaction."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse

from tests.fakes.github.activity import Reaction, activity_of, now
from tests.fakes.github.auth import installation_token, state
from tests.fakes.github.callers import app_of, bot_user, require
from tests.fakes.github.errors import GithubError, not_found
from tests.fakes.github.state import InstallationToken

router = APIRouter()

DOCS = "https://docs.github.com/rest/reactions/reactions"
CONTENTS = frozenset({"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"})


def _react(request: Request, token: InstallationToken, target: str, body: dict[str, Any] | None) -> JSONResponse:
    content = (body or {}).get("content")
    if content not in CONTENTS:
        raise GithubError(422, "Invalid request.\n\nFor 'properties/content', is not one of the allowed values.", DOCS)
    activity = activity_of(state(request))
    bot = bot_user(app_of(request, token))
    for existing in activity.reactions_to(target):
        if existing.content == content and existing.login == bot["login"]:
            return JSONResponse(_json(existing, bot), status_code=200)
    reaction = Reaction(activity.next_id(), target, str(content), bot["login"])
    activity.reactions.append(reaction)
    return JSONResponse(_json(reaction, bot), status_code=201)


def _json(reaction: Reaction, user: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": reaction.id,
        "node_id": f"REA_{reaction.id}",
        "user": user,
        "content": reaction.content,
        "created_at": now(),
    }


@router.post("/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions")
async def react_to_issue_comment(
    owner: str,
    repo: str,
    comment_id: int,
    request: Request,
    token: Annotated[InstallationToken, Depends(installation_token)],
    body: Annotated[dict[str, Any] | None, Body()] = None,
) -> JSONResponse:
    full_name = f"{owner}/{repo}"
    require(request, token, full_name, "issues", DOCS)
    comment = activity_of(state(request)).comments.get(comment_id)
    if comment is None or comment.kind != "issue_comment" or comment.repository != full_name.lower():
        raise not_found(DOCS)
    return _react(request, token, f"issue_comment:{comment_id}", body)


@router.post("/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions")
async def react_to_review_comment(
    owner: str,
    repo: str,
    comment_id: int,
    request: Request,
    token: Annotated[InstallationToken, Depends(installation_token)],
    body: Annotated[dict[str, Any] | None, Body()] = None,
) -> JSONResponse:
    full_name = f"{owner}/{repo}"
    require(request, token, full_name, "pull_requests", DOCS)
    comment = activity_of(state(request)).comments.get(comment_id)
    if comment is None or comment.kind != "review_comment" or comment.repository != full_name.lower():
        raise not_found(DOCS)
    return _react(request, token, f"review_comment:{comment_id}", body)


@router.post("/repos/{owner}/{repo}/issues/{number}/reactions")
async def react_to_issue(
    owner: str,
    repo: str,
    number: int,
    request: Request,
    token: Annotated[InstallationToken, Depends(installation_token)],
    body: Annotated[dict[str, Any] | None, Body()] = None,
) -> JSONResponse:
    full_name = f"{owner}/{repo}"
    require(request, token, full_name, "issues", DOCS)
    if activity_of(state(request)).issue(full_name, number) is None:
        raise not_found(DOCS)
    return _react(request, token, f"issue:{full_name.lower()}#{number}", body)
