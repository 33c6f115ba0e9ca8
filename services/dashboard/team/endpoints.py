"""``/api/v1/team``: the team defaults (administrators change them)."""

from typing import Annotated

from fastapi import APIRouter, Depends

from services.dashboard.auth.guard import Principal
from services.dashboard.context import Dashboard
from services.dashboard.errors import responses
from services.dashboard.team.schemas import TeamIO
from services.dashboard.team.service import Team


def router(dashboard: Dashboard) -> APIRouter:
    team = Team(dashboard)
    guard = dashboard.guard
    api = APIRouter(prefix="/api/v1/team", tags=["team"], route_class=dashboard.api_route)

    @api.get("", responses=responses(), summary="The team defaults")
    async def get_team(principal: Annotated[Principal, Depends(guard.principal)]) -> TeamIO:
        return await team.get()

    @api.put("", responses=responses(422), summary="Replace the team defaults (administrators)")
    async def put_team(principal: Annotated[Principal, Depends(guard.admin_writer)], change: TeamIO) -> TeamIO:
        return await team.save(change)

    return api
