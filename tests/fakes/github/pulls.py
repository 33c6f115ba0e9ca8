"""Pull requests: ``POST``/``GET /repos/{owner}/{repo}/pulls`` and ``GET``/``PATCH
/repos/{owner}/{repo}/pulls/{number}``, as the App (installation token) or a user (OAuth token).

As GitHub does, the fake answers 422 ``Validation Failed`` with its ``errors`` list when a pull
request is already open for the same head branch, when head and base are the same branch, or
for an unknown ``state``. Branches themselves are not modelled: any head branch is accepted
(its head sha is derived from the name, unless a test moved it in :mod:`tests.fakes.github.history`,
which also holds labels and mergeability). Issues and pull requests share one number sequence; a
new pull request is also an issue of :mod:`tests.fakes.github.activity`, so it can be commented on.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse

from tests.fakes.github.activity import activity_of
from tests.fakes.github.actors import Actor, acting, require_access
from tests.fakes.github.app_tokens import repository_json
from tests.fakes.github.auth import state
from tests.fakes.github.callers import body_field
from tests.fakes.github.errors import GithubError, not_found
from tests.fakes.github.history import history_of
from tests.fakes.github.labels import label_json
from tests.fakes.github.state import GithubState, PullRequest

router = APIRouter()

CREATE_DOCS = "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"
LIST_DOCS = "https://docs.github.com/rest/pulls/pulls#list-pull-requests"
GET_DOCS = "https://docs.github.com/rest/pulls/pulls#get-a-pull-request"
UPDATE_DOCS = "https://docs.github.com/rest/pulls/pulls#update-a-pull-request"


def _timestamp(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else None


def branch_sha(full_name: str, ref: str) -> str:
    """The head commit the fake reports for a branch (stable for its name)."""
    return hashlib.sha1(f"{full_name.lower()}:{ref}".encode()).hexdigest()


def _validation_failed(documentation: str, *errors: dict[str, Any]) -> JSONResponse:
    return JSONResponse(
        {"message": "Validation Failed", "errors": list(errors), "documentation_url": documentation, "status": "422"},
        status_code=422,
    )


def _exists(pull: PullRequest, documentation: str) -> JSONResponse:
    message = f"A pull request already exists for {pull.owner}:{pull.head_ref}."
    return _validation_failed(documentation, {"resource": "PullRequest", "code": "custom", "message": message})


def pull_json(github: GithubState, pull: PullRequest, base_url: str) -> dict[str, Any]:
    """A pull request in the shape of GitHub's ``pull-request`` object (the fields clients read)."""
    repository = github.repository(pull.repository)
    repo = repository_json(repository, base_url)
    full_name = repository.full_name
    html_url = f"https://github.com/{full_name}/pull/{pull.number}"
    owner = {"login": repository.owner, "type": "Organization"}
    history, number = history_of(github), pull.number
    mergeable = history.mergeable.get((full_name.lower(), number)) if pull.state == "open" else None
    return {
        "url": f"{base_url}/repos/{full_name}/pulls/{pull.number}",
        "id": pull.id,
        "node_id": f"PR_{pull.id}",
        "html_url": html_url,
        "diff_url": f"{html_url}.diff",
        "patch_url": f"{html_url}.patch",
        "issue_url": f"{base_url}/repos/{full_name}/issues/{pull.number}",
        "number": pull.number,
        "state": pull.state,
        "locked": False,
        "title": pull.title,
        "user": pull.user,
        "body": pull.body,
        "created_at": _timestamp(pull.created_at),
        "updated_at": _timestamp(pull.updated_at),
        "closed_at": _timestamp(pull.closed_at),
        "merged_at": _timestamp(pull.merged_at),
        "merge_commit_sha": None,
        "draft": pull.draft,
        "head": {
            "label": f"{repository.owner}:{pull.head_ref}",
            "ref": pull.head_ref,
            "sha": history.head_sha(pull),
            "user": owner,
            "repo": repo,
        },
        "base": {
            "label": f"{repository.owner}:{pull.base_ref}",
            "ref": pull.base_ref,
            "sha": history.branch_head(full_name, pull.base_ref) or branch_sha(full_name, pull.base_ref),
            "user": owner,
            "repo": repo,
        },
        "author_association": "NONE",
        "merged": pull.merged_at is not None,
        "mergeable": mergeable,
        "mergeable_state": {None: "unknown", True: "clean", False: "dirty"}[mergeable],
        "labels": [label_json(full_name, name, base_url) for name in history.labels_of(full_name, number)],
        "comments": 0,
        "review_comments": 0,
        "commits": 1,
    }


def _base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _open_for_head(github: GithubState, full_name: str, head_ref: str) -> PullRequest | None:
    return next((p for p in github.pulls_of(full_name) if p.head_ref == head_ref and p.state == "open"), None)


def _next_number(github: GithubState, full_name: str) -> int:
    activity = activity_of(github)
    numbers = [number for (repo, number) in activity.issues if repo == full_name.lower()]
    numbers += [pull.number for pull in github.pulls_of(full_name)]
    return max(numbers, default=0) + 1


@router.post("/repos/{owner}/{repo}/pulls")
async def create_pull(
    owner: str,
    repo: str,
    request: Request,
    actor: Annotated[Actor, Depends(acting)],
    body: Annotated[dict[str, Any] | None, Body()] = None,
) -> JSONResponse:
    github = state(request)
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "pull_requests", CREATE_DOCS)
    title = body_field(body, "title", CREATE_DOCS)
    head = body_field(body, "head", CREATE_DOCS)
    base = body_field(body, "base", CREATE_DOCS)
    head_owner, _, head_ref = head.rpartition(":")
    if head_owner and head_owner.lower() != owner.lower():
        return _validation_failed(CREATE_DOCS, {"resource": "PullRequest", "field": "head", "code": "invalid"})
    if head_ref == base:
        message = f"No commits between {base} and {head_ref}"
        return _validation_failed(CREATE_DOCS, {"resource": "PullRequest", "code": "custom", "message": message})
    existing = _open_for_head(github, full_name, head_ref)
    if existing is not None:
        return _exists(existing, CREATE_DOCS)
    repository = github.repository(full_name)
    text = (body or {}).get("body")
    pull = PullRequest(
        id=github.next_id(),
        repository=repository.full_name,
        number=_next_number(github, full_name),
        title=title,
        body=text if isinstance(text, str) else None,
        head_ref=head_ref,
        head_sha=branch_sha(full_name, head_ref),
        base_ref=base,
        draft=bool((body or {}).get("draft", False)),
        user=actor.user,
    )
    github.pulls[(full_name.lower(), pull.number)] = pull
    activity_of(github).open_issue(full_name, pull.number, pull_request=True)
    return JSONResponse(pull_json(github, pull, _base_url(request)), status_code=201)


@router.get("/repos/{owner}/{repo}/pulls")
async def list_pulls(
    owner: str,
    repo: str,
    request: Request,
    actor: Annotated[Actor, Depends(acting)],
) -> JSONResponse:
    github = state(request)
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "pull_requests", LIST_DOCS, level="read")
    query = request.query_params
    wanted = query.get("state", "open")
    if wanted not in {"open", "closed", "all"}:
        return _validation_failed(LIST_DOCS, {"resource": "PullRequest", "field": "state", "code": "invalid"})
    head, base = query.get("head"), query.get("base")
    found = []
    for pull in github.pulls_of(full_name):
        if wanted != "all" and pull.state != wanted:
            continue
        if head is not None and head.lower() != f"{pull.owner}:{pull.head_ref}".lower():
            continue
        if base is not None and base != pull.base_ref:
            continue
        found.append(pull_json(github, pull, _base_url(request)))
    per_page = min(int(query["per_page"]), 100) if query.get("per_page", "").isdigit() else 30
    return JSONResponse(found[:per_page])


def _pull(github: GithubState, full_name: str, number: int, documentation: str) -> PullRequest:
    found = github.pulls.get((full_name.lower(), number))
    if found is None:
        raise not_found(documentation)
    return found


@router.get("/repos/{owner}/{repo}/pulls/{number}")
async def get_pull(
    owner: str, repo: str, number: int, request: Request, actor: Annotated[Actor, Depends(acting)]
) -> JSONResponse:
    github = state(request)
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "pull_requests", GET_DOCS, level="read")
    return JSONResponse(pull_json(github, _pull(github, full_name, number, GET_DOCS), _base_url(request)))


@router.patch("/repos/{owner}/{repo}/pulls/{number}")
async def update_pull(
    owner: str,
    repo: str,
    number: int,
    request: Request,
    actor: Annotated[Actor, Depends(acting)],
    body: Annotated[dict[str, Any] | None, Body()] = None,
) -> JSONResponse:
    github = state(request)
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "pull_requests", UPDATE_DOCS)
    pull = _pull(github, full_name, number, UPDATE_DOCS)
    changes = body or {}
    new_state = changes.get("state")
    if new_state is not None and new_state not in {"open", "closed"}:
        return _validation_failed(UPDATE_DOCS, {"resource": "PullRequest", "field": "state", "code": "invalid"})
    if new_state == "open" and pull.state == "closed":
        existing = _open_for_head(github, full_name, pull.head_ref)
        if existing is not None:
            return _exists(existing, UPDATE_DOCS)
    for name in ("title", "body"):
        value = changes.get(name)
        if value is not None and not isinstance(value, str):
            raise GithubError(422, f"Invalid request.\n\nFor 'properties/{name}', {value!r} is not a string.")
    if isinstance(changes.get("title"), str):
        pull.title = changes["title"]
    if isinstance(changes.get("body"), str):
        pull.body = changes["body"]
    if isinstance(changes.get("base"), str) and changes["base"]:
        pull.base_ref = changes["base"]
    if new_state is not None and new_state != pull.state:
        pull.state = new_state
        pull.closed_at = datetime.now(UTC).replace(microsecond=0) if new_state == "closed" else None
    pull.updated_at = datetime.now(UTC).replace(microsecond=0)
    return JSONResponse(pull_json(github, pull, _base_url(request)))
