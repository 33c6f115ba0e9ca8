"""``/api/v1/repositories``: the App's repositories and which agents work on each (administrators)."""

from typing import Annotated

from fastapi import APIRouter, Depends, Response

from services.dashboard.auth.guard import Principal
from services.dashboard.context import Dashboard
from services.dashboard.errors import responses
from services.dashboard.repositories.schemas import RepositoriesOut, RepositoryAdd, RepositoryIn, RepositoryOut
from services.dashboard.repositories.service import Repositories


def router(dashboard: Dashboard) -> APIRouter:
    repositories = Repositories(dashboard)
    guard = dashboard.guard
    api = APIRouter(prefix="/api/v1/repositories", tags=["repositories"], route_class=dashboard.api_route)
    Admin = Annotated[Principal, Depends(guard.admin)]
    AdminWriter = Annotated[Principal, Depends(guard.admin_writer)]

    @api.get("", responses=responses(), summary="Repositories and their agents (administrators)")
    async def list_repositories(principal: Admin) -> RepositoriesOut:
        return await repositories.listing()

    @api.post("", status_code=201, responses=responses(422, 502, 503), summary="Enable a repository by its name")
    async def add_repository(principal: AdminWriter, change: RepositoryAdd) -> RepositoryOut:
        return await repositories.add(change)

    @api.put("/{owner}/{name}", responses=responses(422, 502, 503), summary="Enable a repository or change its agents")
    async def enable_repository(principal: AdminWriter, owner: str, name: str, change: RepositoryIn) -> RepositoryOut:
        return await repositories.enable(owner, name, change)

    @api.delete("/{owner}/{name}", status_code=204, responses=responses(404, 422), summary="Disable a repository")
    async def disable_repository(principal: AdminWriter, owner: str, name: str) -> Response:
        await repositories.disable(owner, name)
        return Response(status_code=204)

    return api
