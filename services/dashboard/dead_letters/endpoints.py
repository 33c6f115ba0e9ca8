"""``/api/v1/dead-letters``: administrators list the wakes that used up their deliveries and
retry one (the thread is woken again and the record removed); under ``/deliveries``, the GitHub
webhook deliveries the redelivery sweep gave up on, and ask GitHub for one again."""

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends, Path

from drydock.channels.github.given_up import GivenUpDeliveries
from drydock.worker.dead_letters import DeadLetters
from services.dashboard.auth.guard import Principal
from services.dashboard.context import Dashboard
from services.dashboard.dead_letters.deliveries import GUID, deliver_again
from services.dashboard.dead_letters.schemas import DeadLetterIO, GivenUpDeliveryIO
from services.dashboard.errors import NotFound, responses

LETTER_ID = r"^[a-z]+-[0-9]{1,20}$"


def router(dashboard: Dashboard) -> APIRouter:
    runtime = dashboard.runtime
    letters = DeadLetters(runtime.redis, runtime.keys)
    given_up = GivenUpDeliveries(runtime.redis, runtime.keys)
    guard = dashboard.guard
    api = APIRouter(prefix="/api/v1/dead-letters", tags=["dead letters"], route_class=dashboard.api_route)

    @api.get("", responses=responses(), summary="Wakes that used up their deliveries (administrators)")
    async def list_dead_letters(principal: Annotated[Principal, Depends(guard.admin)]) -> list[DeadLetterIO]:
        return [DeadLetterIO(**asdict(letter)) for letter in await letters.all()]

    @api.post("/{letter_id}/retry", responses=responses(404, 422), summary="Wake the thread again (administrators)")
    async def retry_dead_letter(
        principal: Annotated[Principal, Depends(guard.admin_writer)],
        letter_id: Annotated[str, Path(pattern=LETTER_ID, max_length=40)],
    ) -> DeadLetterIO:
        retried = await letters.retry(letter_id, runtime.bus)
        if retried is None:
            raise NotFound(f"no dead letter {letter_id}")
        return DeadLetterIO(**asdict(retried))

    @api.get(
        "/deliveries",
        responses=responses(),
        summary="GitHub webhook deliveries still failing after every redelivery (administrators)",
    )
    async def list_given_up(principal: Annotated[Principal, Depends(guard.admin)]) -> list[GivenUpDeliveryIO]:
        return [GivenUpDeliveryIO(**asdict(delivery)) for delivery in await given_up.all()]

    @api.post(
        "/deliveries/{guid}/redeliver",
        status_code=202,
        responses=responses(404, 409, 422, 502, 503),
        summary="Ask GitHub to send a given-up delivery again (administrators)",
    )
    async def redeliver_given_up_delivery(
        principal: Annotated[Principal, Depends(guard.admin_writer)],
        guid: Annotated[str, Path(pattern=GUID, max_length=64)],
    ) -> GivenUpDeliveryIO:
        return GivenUpDeliveryIO(**asdict(await deliver_again(given_up, dashboard.github_api, guid)))

    return api
