"""Check runs: ``POST /repos/{owner}/{repo}/check-runs`` and
``PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}``, with GitHub's validation (a
completed run needs a conclusion) and its ``checks: write`` permission."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse

from tests.fakes.github.activity import CheckRun, activity_of, now
from tests.fakes.github.auth import installation_token, state
from tests.fakes.github.callers import app_of, body_field, require
from tests.fakes.github.errors import GithubError, not_found
from tests.fakes.github.state import App, InstallationToken

router = APIRouter()

CREATE_DOCS = "https://docs.github.com/rest/checks/runs#create-a-check-run"
UPDATE_DOCS = "https://docs.github.com/rest/checks/runs#update-a-check-run"
STATUSES = frozenset({"queued", "in_progress", "completed", "waiting", "requested", "pending"})
CONCLUSIONS = frozenset(
    {"action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out"}
)


def _validated(body: dict[str, Any], status: str, documentation: str) -> tuple[str, str | None]:
    if status not in STATUSES:
        raise GithubError(
            422, "Invalid request.\n\nFor 'properties/status', is not one of the allowed values.", documentation
        )
    conclusion = body.get("conclusion")
    if conclusion is not None and conclusion not in CONCLUSIONS:
        raise GithubError(
            422, "Invalid request.\n\nFor 'properties/conclusion', is not one of the allowed values.", documentation
        )
    if status == "completed" and conclusion is None:
        raise GithubError(422, 'Invalid request.\n\nNo subschema in "anyOf" matched.', documentation)
    output = body.get("output")
    if output is not None and (not isinstance(output, dict) or not output.get("title") or not output.get("summary")):
        raise GithubError(422, 'Invalid request.\n\n"title", "summary" weren\'t supplied.', documentation)
    return status, conclusion


def check_run_json(run: CheckRun, app: App, base_url: str) -> dict[str, Any]:
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
        "output": {
            "title": run.output.get("title"),
            "summary": run.output.get("summary"),
            "text": run.output.get("text"),
            "annotations_count": 0,
            "annotations_url": f"{base_url}/repos/{run.repository}/check-runs/{run.id}/annotations",
        },
        "name": run.name,
        "check_suite": {"id": run.id + 1},
        "app": {"id": app.id, "slug": app.slug, "name": app.slug},
        "pull_requests": [],
    }


@router.post("/repos/{owner}/{repo}/check-runs")
async def create_check_run(
    owner: str,
    repo: str,
    request: Request,
    token: Annotated[InstallationToken, Depends(installation_token)],
    body: Annotated[dict[str, Any] | None, Body()] = None,
) -> JSONResponse:
    full_name = f"{owner}/{repo}"
    require(request, token, full_name, "checks", CREATE_DOCS)
    request_body = body or {}
    name = body_field(request_body, "name", CREATE_DOCS)
    head_sha = body_field(request_body, "head_sha", CREATE_DOCS)
    status, conclusion = _validated(request_body, str(request_body.get("status", "queued")), CREATE_DOCS)
    activity = activity_of(state(request))
    app = app_of(request, token)
    run = CheckRun(
        activity.next_id(),
        full_name.lower(),
        name,
        head_sha,
        status,
        conclusion,
        dict(request_body.get("output") or {}),
        f"{app.slug}[bot]",
    )
    if status == "completed":
        run.completed_at = now()
    activity.check_runs[run.id] = run
    return JSONResponse(check_run_json(run, app, str(request.base_url).rstrip("/")), status_code=201)


@router.patch("/repos/{owner}/{repo}/check-runs/{check_run_id}")
async def update_check_run(
    owner: str,
    repo: str,
    check_run_id: int,
    request: Request,
    token: Annotated[InstallationToken, Depends(installation_token)],
    body: Annotated[dict[str, Any] | None, Body()] = None,
) -> JSONResponse:
    full_name = f"{owner}/{repo}"
    require(request, token, full_name, "checks", UPDATE_DOCS)
    app = app_of(request, token)
    run = activity_of(state(request)).check_runs.get(check_run_id)
    if run is None or run.repository != full_name.lower():
        raise not_found(UPDATE_DOCS)
    if run.login != f"{app.slug}[bot]":
        raise GithubError(
            403,
            f"Invalid app_id `{app.id}` - check run can only be modified by the GitHub App that created it.",
            UPDATE_DOCS,
        )
    request_body = body or {}
    status, conclusion = _validated(request_body, str(request_body.get("status", run.status)), UPDATE_DOCS)
    run.status, run.conclusion = status, conclusion if conclusion is not None else run.conclusion
    if request_body.get("output"):
        run.output = dict(request_body["output"])
    if status == "completed":
        run.completed_at = now()
    return JSONResponse(check_run_json(run, app, str(request.base_url).rstrip("/")))
