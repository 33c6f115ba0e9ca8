"""``/api/v1/usage``: spend and runs per day by repository, user or model, the biggest threads
and the budgets with today's use (everyone signed in)."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from services.dashboard.auth.guard import Principal
from services.dashboard.context import Dashboard
from services.dashboard.errors import responses
from services.dashboard.usage.schemas import UsageOut
from services.dashboard.usage.service import Usage


def router(dashboard: Dashboard) -> APIRouter:
    usage = Usage(dashboard)
    api = APIRouter(prefix="/api/v1/usage", tags=["usage"], route_class=dashboard.api_route)
    Reader = Annotated[Principal, Depends(dashboard.guard.principal)]

    @api.get("", responses=responses(422), summary="Spend and runs per day, the biggest threads, the budgets")
    async def get_usage(
        principal: Reader,
        by: Annotated[str, Query(max_length=20, description="repository, user or model")] = "repository",
        days: Annotated[int, Query(ge=1, le=366, description="Days up to today (UTC).")] = 14,
    ) -> UsageOut:
        return await usage.report(principal, by, days)

    return api
