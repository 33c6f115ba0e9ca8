"""Labels of issues and pull requests: ``GET``/``POST /repos/{owner}/{repo}/issues/{number}/labels``
and ``DELETE …/labels/{name}``. As GitHub does, adding answers the issue's whole label list,
removing a label it does not have is 404 ``Label does not exist``."""

from __future__ import annotations

import zlib
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse

from tests.fakes.github.activity import activity_of
from tests.fakes.github.actors import Actor, acting, require_access
from tests.fakes.github.auth import state
from tests.fakes.github.errors import GithubError, not_found
from tests.fakes.github.history import history_of

router = APIRouter()

LIST_DOCS = "https://docs.github.com/rest/issues/labels#list-labels-for-an-issue"
ADD_DOCS = "https://docs.github.com/rest/issues/labels#add-labels-to-an-issue"
REMOVE_DOCS = "https://docs.github.com/rest/issues/labels#remove-a-label-from-an-issue"


def label_json(full_name: str, name: str, base_url: str) -> dict[str, Any]:
    label_id = zlib.crc32(f"{full_name.lower()}\0{name}".encode())
    return {
        "id": label_id,
        "node_id": f"LA_{label_id}",
        "url": f"{base_url}/repos/{full_name}/labels/{name}",
        "name": name,
        "color": "ededed",
        "default": False,
        "description": None,
    }


def labels_json(request: Request, full_name: str, number: int) -> list[dict[str, Any]]:
    base_url = str(request.base_url).rstrip("/")
    names = history_of(state(request)).labels.get((full_name.lower(), number), [])
    return [label_json(full_name, name, base_url) for name in names]


def _issue(request: Request, full_name: str, number: int, documentation: str) -> None:
    github = state(request)
    if activity_of(github).issue(full_name, number) is None and (full_name.lower(), number) not in github.pulls:
        raise not_found(documentation)


@router.get("/repos/{owner}/{repo}/issues/{number}/labels")
async def list_labels(
    owner: str, repo: str, number: int, request: Request, actor: Annotated[Actor, Depends(acting)]
) -> JSONResponse:
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "issues", LIST_DOCS, level="read")
    _issue(request, full_name, number, LIST_DOCS)
    return JSONResponse(labels_json(request, full_name, number))


@router.post("/repos/{owner}/{repo}/issues/{number}/labels")
async def add_labels(
    owner: str,
    repo: str,
    number: int,
    request: Request,
    actor: Annotated[Actor, Depends(acting)],
    body: Annotated[dict[str, Any] | None, Body()] = None,
) -> JSONResponse:
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "issues", ADD_DOCS)
    _issue(request, full_name, number, ADD_DOCS)
    wanted = (body or {}).get("labels")
    if not isinstance(wanted, list) or not all(isinstance(name, str) and name for name in wanted):
        raise GithubError(422, "Invalid request.\n\nFor 'properties/labels', is not an array of strings.", ADD_DOCS)
    names = history_of(state(request)).labels.setdefault((full_name.lower(), number), [])
    names += [name for name in wanted if name not in names]
    return JSONResponse(labels_json(request, full_name, number))


@router.delete("/repos/{owner}/{repo}/issues/{number}/labels/{name}")
async def remove_label(
    owner: str, repo: str, number: int, name: str, request: Request, actor: Annotated[Actor, Depends(acting)]
) -> JSONResponse:
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "issues", REMOVE_DOCS)
    names = history_of(state(request)).labels.get((full_name.lower(), number), [])
    if name not in names:
        raise GithubError(404, "Label does not exist", REMOVE_DOCS)
    names.remove(name)
    return JSONResponse(labels_json(request, full_name, number))
