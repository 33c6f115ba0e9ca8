"""``/api/v1/review-styles``: review guidelines per repository, their versions, edits,
approvals and bootstrap analyses."""

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from services.dashboard.auth.guard import Principal
from services.dashboard.context import Dashboard
from services.dashboard.errors import responses
from services.dashboard.review_styles.schemas import (
    BootstrapOut,
    DecisionIn,
    EditIn,
    ReviewStyleOut,
    ReviewStyleSummary,
    VersionOut,
)
from services.dashboard.review_styles.service import ReviewStyles

Version = Annotated[int, Path(ge=1, le=1_000_000)]


def router(dashboard: Dashboard) -> APIRouter:
    styles = ReviewStyles(dashboard)
    guard = dashboard.guard
    api = APIRouter(prefix="/api/v1/review-styles", tags=["review styles"], route_class=dashboard.api_route)
    Reader = Annotated[Principal, Depends(guard.principal)]
    AdminWriter = Annotated[Principal, Depends(guard.admin_writer)]

    @api.get("", responses=responses(), summary="Review styles of the repositories you may see")
    async def list_review_styles(principal: Reader) -> list[ReviewStyleSummary]:
        return await styles.overview(principal)

    @api.get("/{owner}/{name}", responses=responses(404, 422), summary="A repository's guidelines and versions")
    async def get_review_style(principal: Reader, owner: str, name: str) -> ReviewStyleOut:
        return await styles.get(principal, owner, name)

    @api.get("/{owner}/{name}/versions/{version}", responses=responses(404, 422), summary="One version")
    async def get_review_style_version(principal: Reader, owner: str, name: str, version: Version) -> VersionOut:
        return await styles.version(principal, owner, name, version)

    @api.post(
        "/{owner}/{name}/versions",
        status_code=201,
        responses=responses(404, 422),
        summary="Edit: save your own version of the rules (administrators)",
    )
    async def edit_review_style(principal: AdminWriter, owner: str, name: str, change: EditIn) -> VersionOut:
        return await styles.edit(principal, owner, name, change)

    @api.post(
        "/{owner}/{name}/versions/{version}/approve",
        responses=responses(404, 422),
        summary="Approve a version: the reviewer applies it (administrators)",
    )
    async def approve_review_style(
        principal: AdminWriter, owner: str, name: str, version: Version, decision: DecisionIn
    ) -> VersionOut:
        return await styles.decide(principal, owner, name, version, decision, approve=True)

    @api.post(
        "/{owner}/{name}/versions/{version}/reject",
        responses=responses(404, 422),
        summary="Reject a version (administrators)",
    )
    async def reject_review_style(
        principal: AdminWriter, owner: str, name: str, version: Version, decision: DecisionIn
    ) -> VersionOut:
        return await styles.decide(principal, owner, name, version, decision, approve=False)

    @api.post(
        "/{owner}/{name}/bootstrap",
        status_code=202,
        responses=responses(404, 422, 503),
        summary="Ask the analyzer to learn the repository's guidelines (administrators)",
    )
    async def bootstrap_review_style(principal: AdminWriter, owner: str, name: str) -> BootstrapOut:
        return await styles.bootstrap(principal, owner, name)

    return api
