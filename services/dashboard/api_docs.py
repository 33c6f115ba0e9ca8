"""The OpenAPI document and its page (the bundled Swagger UI) in production, for signed-in people only.

In development every app publishes ``/openapi.json`` and ``/docs`` itself (:func:`drydock.http.create_app`);
in production it publishes neither, and these routes serve them behind the dashboard's sign-in.
"""

# No `from __future__ import annotations`: FastAPI must evaluate the dependency annotations,
# which name the local `guard`.
from typing import Annotated, Any, cast

from fastapi import APIRouter, Depends, FastAPI, Request

from drydock import swagger
from drydock.config import Environment
from services.dashboard.auth.guard import Principal
from services.dashboard.context import Dashboard

OPENAPI_PATH = "/openapi.json"


def router(dashboard: Dashboard) -> APIRouter:
    """The guarded ``/openapi.json`` and ``/docs``; no routes in development (the app's own are open)."""
    docs = APIRouter(route_class=dashboard.api_route, include_in_schema=False)
    if dashboard.settings.environment is not Environment.PRODUCTION:
        return docs
    guard = dashboard.guard

    @docs.get(OPENAPI_PATH)
    async def openapi(request: Request, _: Annotated[Principal, Depends(guard.principal)]) -> dict[str, Any]:
        return cast(FastAPI, request.app).openapi()

    docs.include_router(
        swagger.router(OPENAPI_PATH, "Drydock API", dependencies=[guard.principal], route_class=dashboard.api_route)
    )
    return docs
