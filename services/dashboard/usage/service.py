"""The usage page's data, from the usage roll-ups (:class:`~drydock.usage.UsageLedger`): spend
and runs per day by repository, user or model over the last days, the biggest threads, and each
budget with how close today's use is. Everyone signed in may look; it shows amounts, not work:
a repository or a thread the reader may not see is shown without its name or title."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from drydock.budgets import ActiveRuns, Limits
from drydock.threads.metadata import ThreadMetadataStore
from drydock.usage import Dimension, UsageLedger, UsageTotals
from services.dashboard.auth.access import Visible
from services.dashboard.auth.guard import Principal
from services.dashboard.context import Dashboard
from services.dashboard.errors import Invalid
from services.dashboard.threads.service import title_of
from services.dashboard.usage.schemas import BudgetUseOut, MemberOut, ThreadUsageOut, TotalsOut, UsageOut

DIMENSIONS = {"repository": Dimension.REPOSITORY, "user": Dimension.USER, "model": Dimension.MODEL}
SHOWN = 6
"""Members drawn in the chart; the rest are summed as ``others``."""
PER_DAY = 50
"""Members of one day's ranking read (the biggest by cost)."""
UNSEEN = ""
"""The member that sums the repositories the reader may not see."""
UNSEEN_REPOSITORIES = "repositories you cannot see"
UNSEEN_THREAD = "a thread you cannot see"


class Usage:
    def __init__(self, dashboard: Dashboard) -> None:
        self._d = dashboard
        self._ledger = UsageLedger(
            dashboard.runtime.redis,
            dashboard.runtime.keys,
            retention_days=dashboard.settings.models.usage_retention_days,
        )
        self._metadata = ThreadMetadataStore(dashboard.runtime.redis, dashboard.runtime.keys)
        self._active = ActiveRuns(dashboard.runtime.redis, dashboard.runtime.keys)

    async def report(self, principal: Principal, by: str, days: int, *, today: date | None = None) -> UsageOut:
        """What ``principal`` may see of it; :class:`Invalid` for an unknown ``by`` or a period
        beyond the retention."""
        dimension = DIMENSIONS.get(by)
        if dimension is None:
            raise Invalid.field(("query", "by"), f"choose one of {', '.join(DIMENSIONS)}")
        retention = self._d.settings.models.usage_retention_days
        if not 1 <= days <= retention:
            raise Invalid.field(("query", "days"), f"choose between 1 and {retention} days (the usage retention)")
        last = today or datetime.now(UTC).date()
        period = [last - timedelta(days=offset) for offset in range(days - 1, -1, -1)]
        per_day = [dict(await self._ledger.ranking(dimension, day, top=PER_DAY)) for day in period]
        visible = await self._d.access.visible(principal.session)
        if dimension is Dimension.REPOSITORY and visible.repositories is not None:
            per_day = [_unseen_summed(ranking, visible) for ranking in per_day]
        totals: dict[str, UsageTotals] = {}
        for ranking in per_day:
            for name, day_totals in ranking.items():
                totals[name] = totals.get(name, UsageTotals()) + day_totals
        order = sorted(totals, key=lambda name: (-totals[name].priced_cost_usd, -totals[name].calls, name))
        labels = await self._labels(dimension, order) | {UNSEEN: UNSEEN_REPOSITORIES}
        members = [
            MemberOut(
                name=name,
                label=labels.get(name, name),
                total=TotalsOut.of(totals[name]),
                days=[TotalsOut.of(ranking.get(name, UsageTotals())) for ranking in per_day],
            )
            for name in order
        ]
        total_days = [TotalsOut.of(sum(ranking.values(), UsageTotals())) for ranking in per_day]
        return UsageOut(
            by=by,
            days=period,
            members=members,
            total_days=total_days,
            threads=await self._threads(visible, period),
            budgets=await self._budgets(visible, last),
        )

    async def _labels(self, dimension: Dimension, names: list[str]) -> dict[str, str]:
        if dimension is not Dimension.USER or not names:
            return {}
        identities = await self._d.accounts.identities(names)
        return {user_id: identity.login for user_id, identity in identities.items()}

    async def _threads(self, visible: Visible, period: list[date], top: int = 10) -> list[ThreadUsageOut]:
        totals: dict[str, UsageTotals] = {}
        for day in period:
            for thread_id, day_totals in await self._ledger.ranking(Dimension.THREAD, day, top=top):
                totals[thread_id] = totals.get(thread_id, UsageTotals()) + day_totals
        biggest = sorted(totals, key=lambda name: (-totals[name].priced_cost_usd, -totals[name].calls))[:top]
        found = []
        for thread_id in biggest:
            thread = await self._metadata.find(thread_id)
            if thread is not None and not visible.thread(thread.owner, thread.repository):
                row = ThreadUsageOut(
                    thread_id=thread_id, title=UNSEEN_THREAD, repository=None, visible=False,
                    total=TotalsOut.of(totals[thread_id]),
                )  # fmt: skip
            else:
                row = ThreadUsageOut(
                    thread_id=thread_id,
                    title=title_of(thread) if thread is not None else thread_id,
                    repository=thread.repository if thread is not None else None,
                    total=TotalsOut.of(totals[thread_id]),
                )
            found.append(row)
        return found

    async def _budgets(self, visible: Visible, today: date) -> list[BudgetUseOut]:
        team = await self._d.accounts.team()
        limits = Limits.of(team.budgets)
        found: list[BudgetUseOut] = []
        if limits.user_day_usd is not None:
            users = await self._ledger.ranking(Dimension.USER, today, top=5)
            labels = await self._labels(Dimension.USER, [name for name, _ in users])
            for user_id, totals in users:
                found.append(_spend(f"user {labels.get(user_id, user_id)} per day", totals, limits.user_day_usd))
        for settings in await self._d.accounts.repositories():
            own = Limits.of(team.budgets, settings.budgets)
            if own.repository_day_usd is not None and visible.repository(settings.full_name):
                totals = await self._ledger.day(Dimension.REPOSITORY, settings.full_name.lower(), today)
                found.append(_spend(f"repository {settings.full_name} per day", totals, own.repository_day_usd))
        if limits.active_runs is not None:
            running = await self._active.count()
            found.append(
                BudgetUseOut(limit="runs at once in the team", used=running, allowed=limits.active_runs, unit="runs")
            )
        return found


def _unseen_summed(ranking: dict[str, UsageTotals], visible: Visible) -> dict[str, UsageTotals]:
    """``ranking`` with the repositories the reader may not see summed as :data:`UNSEEN`."""
    shown: dict[str, UsageTotals] = {}
    for name, totals in ranking.items():
        key = name if visible.repository(name) else UNSEEN
        shown[key] = shown.get(key, UsageTotals()) + totals
    return shown


def _spend(limit: str, totals: UsageTotals, allowed: float) -> BudgetUseOut:
    return BudgetUseOut(
        limit=limit,
        used=totals.cost_usd if totals.calls else 0.0,
        allowed=allowed,
        unit="usd",
        unpriced_calls=totals.unpriced_calls,
    )
