"""The budgets' shapes in the team and repository APIs (empty: no limit)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from drydock.accounts import RepositoryBudgets, TeamBudgets


class RepositoryBudgetsIO(BaseModel):
    """A repository's own limits; each unset one is the team's."""

    model_config = ConfigDict(extra="forbid")

    run_usd: float | None = Field(default=None, gt=0, le=1_000_000, description="Spend per run, US dollars.")
    run_model_calls: int | None = Field(default=None, ge=1, le=100_000, description="Model calls per run.")
    repository_day_usd: float | None = Field(
        default=None, gt=0, le=1_000_000, description="Spend per repository per day (UTC), US dollars."
    )

    def record(self) -> RepositoryBudgets:
        return RepositoryBudgets(**self.model_dump())

    @classmethod
    def of(cls, budgets: RepositoryBudgets) -> RepositoryBudgetsIO:
        return cls(**budgets.model_dump())


class TeamBudgetsIO(RepositoryBudgetsIO):
    """The team's limits: every repository's defaults, and the ones only a team has."""

    user_day_usd: float | None = Field(
        default=None, gt=0, le=1_000_000, description="Spend per user per day (UTC), US dollars."
    )
    active_runs: int | None = Field(default=None, ge=1, le=10_000, description="Runs going on at once in the team.")

    def record(self) -> TeamBudgets:
        return TeamBudgets(**self.model_dump())

    @classmethod
    def of(cls, budgets: RepositoryBudgets) -> TeamBudgetsIO:
        return cls(**budgets.model_dump())
