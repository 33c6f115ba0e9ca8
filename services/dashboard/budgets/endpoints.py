"""``/api/v1/threads/{id}/continue``: continue a thread paused at a budget (owner or administrator)."""

from typing import Annotated

from fastapi import APIRouter, Depends

from services.dashboard.auth.guard import Principal
from services.dashboard.budgets.service import Continuing
from services.dashboard.context import Dashboard
from services.dashboard.errors import responses
from services.dashboard.threads.schemas import Accepted
from services.dashboard.threads.service import Threads


def router(dashboard: Dashboard, threads: Threads) -> APIRouter:
    continuing = Continuing(dashboard, threads)
    api = APIRouter(prefix="/api/v1/threads", tags=["threads"], route_class=dashboard.api_route)
    Writer = Annotated[Principal, Depends(dashboard.guard.writer)]

    @api.post(
        "/{thread_id}/continue",
        status_code=202,
        responses=responses(404, 409, 503),
        summary="Continue a thread paused at a budget, once (its owner or an administrator)",
    )
    async def continue_thread(principal: Writer, thread_id: str) -> Accepted:
        return await continuing.resume(principal, thread_id)

    return api
