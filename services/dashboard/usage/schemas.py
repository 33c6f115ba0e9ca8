"""The usage API's shapes. A cost is null when unknown: some of its calls were of a model
without a known price (``unpriced_calls``); ``priced_cost_usd`` is the part that is known."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from drydock.usage import UsageTotals


class TotalsOut(BaseModel):
    runs: int
    calls: int
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cost_usd: float | None = Field(description="null: unknown (a call of a model without a known price), never 0.")
    priced_cost_usd: float
    unpriced_calls: int

    @classmethod
    def of(cls, totals: UsageTotals) -> TotalsOut:
        return cls(
            runs=totals.runs,
            calls=totals.calls,
            input_tokens=totals.input_tokens,
            cached_input_tokens=totals.cached_input_tokens,
            output_tokens=totals.output_tokens,
            reasoning_tokens=totals.reasoning_tokens,
            cost_usd=totals.cost_usd,
            priced_cost_usd=round(totals.priced_cost_usd, 9),
            unpriced_calls=totals.unpriced_calls,
        )


class MemberOut(BaseModel):
    """One repository, user or model over the period, and per day."""

    name: str
    label: str
    total: TotalsOut
    days: list[TotalsOut]


class ThreadUsageOut(BaseModel):
    thread_id: str
    title: str
    repository: str | None
    visible: bool = True
    """False for a thread the reader may not see: its title and repository are left out."""
    total: TotalsOut


class BudgetUseOut(BaseModel):
    """One limit and how close today's use is to it."""

    limit: str = Field(description="What is limited, e.g. 'user octocat per day'.")
    used: float | None = Field(description="Spend today (US dollars) or runs going on; null: unknown.")
    allowed: float
    unit: str = Field(description="usd or runs")
    unpriced_calls: int = 0


class UsageOut(BaseModel):
    by: str = Field(description="repository, user or model")
    days: list[date]
    members: list[MemberOut]
    total_days: list[TotalsOut]
    threads: list[ThreadUsageOut]
    budgets: list[BudgetUseOut]
