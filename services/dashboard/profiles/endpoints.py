"""``/api/v1/profile``: the signed-in person's profile and linked accounts."""

from typing import Annotated

from fastapi import APIRouter, Depends, Response

from drydock.accounts import Provider
from services.dashboard.auth.guard import Principal
from services.dashboard.context import Dashboard
from services.dashboard.errors import responses
from services.dashboard.profiles.schemas import LinkCodeIn, LinkCodeOut, ProfileIn, ProfileOut
from services.dashboard.profiles.service import Profiles


def router(dashboard: Dashboard) -> APIRouter:
    profiles = Profiles(dashboard)
    guard = dashboard.guard
    api = APIRouter(prefix="/api/v1/profile", tags=["profile"], route_class=dashboard.api_route)
    Reader = Annotated[Principal, Depends(guard.principal)]
    Writer = Annotated[Principal, Depends(guard.writer)]

    @api.get("", responses=responses(), summary="Your profile")
    async def get_profile(principal: Reader) -> ProfileOut:
        return await profiles.get(principal)

    @api.put("", responses=responses(422), summary="Replace your profile")
    async def put_profile(principal: Writer, change: ProfileIn) -> ProfileOut:
        return await profiles.save(principal, change)

    @api.post(
        "/link-codes",
        status_code=201,
        responses=responses(422),
        summary="Start linking a Slack or Linear account: a one-time code to send from it",
    )
    async def start_link(principal: Writer, request: LinkCodeIn) -> LinkCodeOut:
        return await profiles.start_link(principal, Provider(request.provider))

    @api.delete(
        "/link-codes/{provider}", status_code=204, responses=responses(404, 422), summary="Withdraw a pending link"
    )
    async def cancel_link(principal: Writer, provider: Provider) -> Response:
        await profiles.cancel_link(principal, provider)
        return Response(status_code=204)

    @api.delete(
        "/identities/{provider}/{external_id}",
        status_code=204,
        responses=responses(404, 422),
        summary="Unlink a Slack or Linear account",
    )
    async def unlink_identity(principal: Writer, provider: Provider, external_id: str) -> Response:
        await profiles.unlink(principal, provider, external_id)
        return Response(status_code=204)

    return api
