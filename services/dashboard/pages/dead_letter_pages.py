"""The dead-letters page: administrators see the wakes that used up their deliveries and
retry one."""

from fastapi import APIRouter, Request, Response

from drydock.worker.dead_letters import DeadLetters
from services.dashboard.errors import NotFound
from services.dashboard.pages.common import PageKit, back
from services.dashboard.pages.forms import read_form


def routes(site: APIRouter, kit: PageKit) -> None:
    runtime = kit.dashboard.runtime
    letters = DeadLetters(runtime.redis, runtime.keys)

    @site.get("/dead-letters")
    async def dead_letters(request: Request) -> Response:
        principal = await kit.administrator(request)
        return kit.render(request, "dead_letters.html", principal, letters=await letters.all())

    @site.post("/dead-letters/{letter_id}/retry")
    async def retry(request: Request, letter_id: str) -> Response:
        principal = await kit.administrator(request)
        await read_form(request, kit.dashboard.guard, principal)
        retried = await letters.retry(letter_id, runtime.bus)
        if retried is None:
            raise NotFound(f"no dead letter {letter_id}")
        return back("/dead-letters", f"Thread {retried.thread_id} woken again.")
