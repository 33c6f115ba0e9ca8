"""``/api/v1/dead-letters``: administrators list the wakes that used up their deliveries and
retry one (the thread is woken again and the record removed)."""

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends, Path

from drydock.worker.dead_letters import DeadLetters
from services.dashboard.auth.guard import Principal
from services.dashboard.context import Dashboard
from services.dashboard.dead_letters.schemas import DeadLetterIO
from services.dashboard.errors import NotFound, responses

LETTER_ID = r"^[a-z]+-[0-9]{1,20}$"


def router(dashboard: Dashboard) -> APIRouter:
    runtime = dashboard.runtime
    letters = DeadLetters(runtime.redis, runtime.keys)
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

    return api
