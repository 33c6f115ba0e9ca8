"""The thread page's Continue form (shown while the thread is paused at a budget)."""

from fastapi import APIRouter, Request, Response

from services.dashboard.budgets.service import Continuing
from services.dashboard.pages.common import PageKit, back
from services.dashboard.pages.forms import read_form
from services.dashboard.threads.service import Threads


def routes(site: APIRouter, kit: PageKit, threads: Threads) -> None:
    continuing = Continuing(kit.dashboard, threads)

    @site.post("/threads/{thread_id}/continue")
    async def continue_thread(request: Request, thread_id: str) -> Response:
        principal = await kit.signed_in(request)
        await read_form(request, kit.dashboard.guard, principal)
        await continuing.resume(principal, thread_id)
        return back(f"/threads/{thread_id}", "Continued once: the run goes on with one more allowance.")
