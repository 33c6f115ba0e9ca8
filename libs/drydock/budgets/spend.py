"""Checking spend against the limits: before a run (the day budgets) and before each model call
(the run's limit too). One check reads the run's and the day's roll-ups in one round trip."""

from __future__ import annotations

import json
from dataclasses import dataclass

from drydock.budgets.limits import Limits
from drydock.budgets.reached import LimitKind, Reached
from drydock.usage.ledger import Dimension, UsageLedger, UsageTotals


@dataclass(frozen=True)
class Grant:
    """A continue given to a thread's next run: it may go past a day budget by ``extra_usd``, and
    calls of unknown cost no longer stop it (the person who continued accepted them)."""

    extra_usd: float
    by: str

    def to_json(self) -> str:
        return json.dumps({"extra_usd": self.extra_usd, "by": self.by})

    @classmethod
    def from_json(cls, raw: str) -> Grant:
        data = json.loads(raw)
        return cls(extra_usd=float(data["extra_usd"]), by=str(data["by"]))


def over(
    kind: LimitKind, limit: float | None, totals: UsageTotals, *, extra: float, accept_unknown: bool, subject: str
) -> Reached | None:
    """``kind``'s limit reached by ``totals`` (None: no limit, or within it)."""
    if limit is None:
        return None
    unknown = totals.unpriced_calls > 0 and not accept_unknown
    if unknown or totals.priced_cost_usd >= limit + extra:
        return Reached(kind, limit, totals.priced_cost_usd, totals.unpriced_calls, subject)
    return None


class SpendCheck:
    """The spend limits of one run, asked before each of its model calls."""

    def __init__(
        self,
        ledger: UsageLedger,
        limits: Limits,
        *,
        run_id: str,
        user_id: str | None,
        repository: str | None,
        user_name: str | None = None,
        grant: Grant | None = None,
    ) -> None:
        self.ledger = ledger
        self.limits = limits
        self.run_id = run_id
        self.user_id = user_id
        self.repository = repository.lower() if repository else None
        self.user_name = user_name or user_id or ""
        self.grant = grant

    async def day_reached(self) -> Reached | None:
        """A day budget (per user, per repository) the day's spend has reached."""
        return await self._check(run=False)

    async def reached(self) -> Reached | None:
        """The first spend limit reached: the run's, then the day budgets (None: go on)."""
        if not self.limits.spend:
            return None
        return await self._check(run=self.limits.run_usd is not None)

    async def _check(self, *, run: bool) -> Reached | None:
        limits, grant = self.limits, self.grant
        days: list[tuple[LimitKind, float, Dimension, str]] = []
        if self.user_id and limits.user_day_usd is not None:
            days.append((LimitKind.USER_DAY, limits.user_day_usd, Dimension.USER, self.user_id))
        if self.repository and limits.repository_day_usd is not None:
            days.append((LimitKind.REPOSITORY_DAY, limits.repository_day_usd, Dimension.REPOSITORY, self.repository))
        if not run and not days:
            return None
        run_totals, day_totals = await self.ledger.run_and_days(
            self.run_id if run else None, [(dimension, value) for _, _, dimension, value in days]
        )
        accept = grant is not None
        if run and limits.run_usd is not None:
            found = over(LimitKind.RUN, limits.run_usd, run_totals, extra=0.0, accept_unknown=accept, subject="")
            if found is not None:
                return found
        extra = grant.extra_usd if grant is not None else 0.0
        for (kind, limit, dimension, value), totals in zip(days, day_totals, strict=True):
            subject = self.user_name if dimension is Dimension.USER else value
            found = over(kind, limit, totals, extra=extra, accept_unknown=accept, subject=subject)
            if found is not None:
                return found
        return None
