"""The usage page: the chart, a table per repository, user or model, the biggest threads and
the budgets with how close today's use is."""

from fastapi import APIRouter, Request, Response

from services.dashboard.pages.common import PageKit
from services.dashboard.usage.chart import usage_chart
from services.dashboard.usage.service import DIMENSIONS, Usage

PERIODS = (7, 14, 30)


def routes(site: APIRouter, kit: PageKit) -> None:
    usage = Usage(kit.dashboard)

    @site.get("/usage")
    async def usage_page(request: Request, by: str = "repository", days: int = 14) -> Response:
        principal = await kit.signed_in(request)
        report = await usage.report(principal, by, days)
        return kit.render(
            request,
            "usage.html",
            principal,
            report=report,
            chart=usage_chart(report),
            dimensions=list(DIMENSIONS),
            periods=PERIODS,
        )
