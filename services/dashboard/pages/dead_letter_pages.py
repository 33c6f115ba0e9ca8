"""The dead-letters page: administrators see the wakes that used up their deliveries and
retry one, and the GitHub webhook deliveries the redelivery sweep gave up on and ask for one again."""

from fastapi import APIRouter, Request, Response

from drydock.channels.github.given_up import GivenUpDeliveries
from drydock.worker.dead_letters import DeadLetters
from services.dashboard.dead_letters.deliveries import deliver_again
from services.dashboard.errors import NotFound
from services.dashboard.pages.common import PageKit, back
from services.dashboard.pages.forms import read_form


def routes(site: APIRouter, kit: PageKit) -> None:
    runtime = kit.dashboard.runtime
    letters = DeadLetters(runtime.redis, runtime.keys)
    given_up = GivenUpDeliveries(runtime.redis, runtime.keys)

    @site.get("/dead-letters")
    async def dead_letters(request: Request) -> Response:
        principal = await kit.administrator(request)
        return kit.render(
            request, "dead_letters.html", principal, letters=await letters.all(), deliveries=await given_up.all()
        )

    @site.post("/dead-letters/{letter_id}/retry")
    async def retry(request: Request, letter_id: str) -> Response:
        principal = await kit.administrator(request)
        await read_form(request, kit.dashboard.guard, principal)
        retried = await letters.retry(letter_id, runtime.bus)
        if retried is None:
            raise NotFound(f"no dead letter {letter_id}")
        return back("/dead-letters", f"Thread {retried.thread_id} woken again.")

    @site.post("/dead-letters/deliveries/{guid}/redeliver")
    async def redeliver(request: Request, guid: str) -> Response:
        principal = await kit.administrator(request)
        await read_form(request, kit.dashboard.guard, principal)
        delivery = await deliver_again(given_up, kit.dashboard.github_api, guid)
        return back("/dead-letters", f"GitHub was asked to send its {delivery.event} delivery {guid} again.")
