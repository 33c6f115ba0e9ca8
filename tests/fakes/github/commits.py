"""Commits and their checks: ``GET /repos/{owner}/{repo}/commits/{ref}``,
``GET …/commits/{ref}/check-runs`` and ``GET …/commits/{ref}/check-suites``, where ``ref`` is a
sha or a branch name. As GitHub does: an unknown commit is 422 ``No commit found for SHA``;
check runs are listed latest-per-name unless ``filter=all``, paginated with ``per_page`` (at
most 100), ``page`` and the ``Link`` header; a check suite groups the runs of one App on the commit."""

from __future__ import annotations

import zlib
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from tests.fakes.github.activity import CheckRun
from tests.fakes.github.actors import Actor, acting, require_access
from tests.fakes.github.auth import state
from tests.fakes.github.errors import GithubError
from tests.fakes.github.history import Commit, history_of
from tests.fakes.github.pagination import paginate

router = APIRouter()

COMMIT_DOCS = "https://docs.github.com/rest/commits/commits#get-a-commit"
RUNS_DOCS = "https://docs.github.com/rest/checks/runs#list-check-runs-for-a-git-reference"
SUITES_DOCS = "https://docs.github.com/rest/checks/suites#list-check-suites-for-a-git-reference"
FAILING = frozenset({"failure", "timed_out", "startup_failure", "action_required"})


def _number(*parts: str) -> int:
    """A stable id for a value the fake does not store (GitHub's ids are stable too)."""
    return zlib.crc32("\0".join(parts).encode()) % 10**9


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _person(login: str | None) -> dict[str, Any] | None:
    if login is None:
        return None
    kind = "Bot" if login.endswith("[bot]") else "User"
    return {"login": login, "id": _number(login), "type": kind, "site_admin": False}


def commit_json(commit: Commit, full_name: str, base_url: str) -> dict[str, Any]:
    return {
        "sha": commit.sha,
        "node_id": f"C_{commit.sha[:16]}",
        "url": f"{base_url}/repos/{full_name}/commits/{commit.sha}",
        "html_url": f"https://github.com/{full_name}/commit/{commit.sha}",
        "commit": {
            "author": {"name": commit.author_name, "email": commit.author_email, "date": commit.date},
            "committer": {"name": commit.committer_name, "email": commit.committer_email, "date": commit.date},
            "message": commit.message,
            "tree": {"sha": "0" * 40},
            "comment_count": 0,
        },
        "author": _person(commit.author_login),
        "committer": _person(commit.committer_login),
        "parents": [{"sha": parent} for parent in commit.parents],
    }


def _app(login: str) -> dict[str, Any]:
    slug = login.removesuffix("[bot]")
    return {"id": _number(slug), "slug": slug, "name": slug}


def run_json(run: CheckRun, base_url: str) -> dict[str, Any]:
    return {
        "id": run.id,
        "node_id": f"CR_{run.id}",
        "head_sha": run.head_sha,
        "external_id": "",
        "url": f"{base_url}/repos/{run.repository}/check-runs/{run.id}",
        "html_url": f"https://github.com/{run.repository}/runs/{run.id}",
        "details_url": None,
        "status": run.status,
        "conclusion": run.conclusion,
        "started_at": run.started_at,
        "completed_at": run.completed_at,
        "output": {"title": run.output.get("title"), "summary": run.output.get("summary"), "text": None},
        "name": run.name,
        "check_suite": {"id": _suite_id(run)},
        "app": _app(run.login),
        "pull_requests": [],
    }


def _suite_id(run: CheckRun) -> int:
    return _number(run.repository, run.head_sha, run.login)


def _latest(runs: list[CheckRun]) -> list[CheckRun]:
    newest: dict[str, CheckRun] = {}
    for run in runs:
        newest[run.name] = run
    return sorted(newest.values(), key=lambda run: run.id)


@router.get("/repos/{owner}/{repo}/commits/{ref}")
async def get_commit(
    owner: str, repo: str, ref: str, request: Request, actor: Annotated[Actor, Depends(acting)]
) -> dict[str, Any]:
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "contents", COMMIT_DOCS, level="read")
    history = history_of(state(request))
    sha = history.resolve(full_name, ref)
    commit = history.commit(full_name, sha)
    if commit is None:
        raise GithubError(422, f"No commit found for SHA: {ref}", COMMIT_DOCS)
    return commit_json(commit, state(request).repository(full_name).full_name, _base(request))


@router.get("/repos/{owner}/{repo}/commits/{ref}/check-runs")
async def list_check_runs(
    owner: str, repo: str, ref: str, request: Request, actor: Annotated[Actor, Depends(acting)]
) -> JSONResponse:
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "checks", RUNS_DOCS, level="read")
    query = request.query_params
    if query.get("filter", "latest") not in {"latest", "all"}:
        raise GithubError(422, "Invalid request.\n\nFor 'filter', is not one of the allowed values.", RUNS_DOCS)
    history = history_of(state(request))
    runs = history.check_runs(full_name, history.resolve(full_name, ref))
    if query.get("filter", "latest") == "latest":
        runs = _latest(runs)
    if query.get("check_name"):
        runs = [run for run in runs if run.name == query["check_name"]]
    if query.get("status"):
        runs = [run for run in runs if run.status == query["status"]]
    chosen, headers = paginate(request, runs)
    body = {"total_count": len(runs), "check_runs": [run_json(run, _base(request)) for run in chosen]}
    return JSONResponse(body, headers=headers)


@router.get("/repos/{owner}/{repo}/commits/{ref}/check-suites")
async def list_check_suites(
    owner: str, repo: str, ref: str, request: Request, actor: Annotated[Actor, Depends(acting)]
) -> JSONResponse:
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "checks", SUITES_DOCS, level="read")
    history = history_of(state(request))
    sha = history.resolve(full_name, ref)
    by_app: dict[str, list[CheckRun]] = {}
    for run in _latest(history.check_runs(full_name, sha)):
        by_app.setdefault(run.login, []).append(run)
    suites = []
    for login, runs in sorted(by_app.items()):
        done = all(run.status == "completed" for run in runs)
        conclusion = None
        if done:
            conclusion = "failure" if any(run.conclusion in FAILING for run in runs) else "success"
        suites.append(
            {
                "id": _suite_id(runs[0]),
                "node_id": f"CS_{_suite_id(runs[0])}",
                "head_branch": None,
                "head_sha": sha,
                "status": "completed" if done else "in_progress",
                "conclusion": conclusion,
                "app": _app(login),
                "pull_requests": [],
                "latest_check_runs_count": len(runs),
                "check_runs_url": f"{_base(request)}/repos/{full_name}/check-suites/{_suite_id(runs[0])}/check-runs",
            }
        )
    chosen, headers = paginate(request, suites)
    return JSONResponse({"total_count": len(suites), "check_suites": chosen}, headers=headers)
