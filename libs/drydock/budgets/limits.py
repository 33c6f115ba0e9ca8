"""The limits that apply to one run: the repository's, else the team's."""

from __future__ import annotations

from dataclasses import dataclass

from drydock.accounts import RepositoryBudgets, TeamBudgets


@dataclass(frozen=True)
class Limits:
    """Each None: no limit."""

    run_usd: float | None = None
    run_model_calls: int | None = None
    user_day_usd: float | None = None
    repository_day_usd: float | None = None
    active_runs: int | None = None

    @classmethod
    def of(cls, team: TeamBudgets, repository: RepositoryBudgets | None = None) -> Limits:
        """The team's limits with the repository's overrides."""
        own = repository or RepositoryBudgets()
        return cls(
            run_usd=own.run_usd if own.run_usd is not None else team.run_usd,
            run_model_calls=own.run_model_calls if own.run_model_calls is not None else team.run_model_calls,
            user_day_usd=team.user_day_usd,
            repository_day_usd=own.repository_day_usd
            if own.repository_day_usd is not None
            else team.repository_day_usd,
            active_runs=team.active_runs,
        )

    @property
    def spend(self) -> bool:
        """Whether any spend limit applies."""
        return any(value is not None for value in (self.run_usd, self.user_day_usd, self.repository_day_usd))
