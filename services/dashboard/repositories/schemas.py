"""The enabled-repositories API's shapes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from services.dashboard.budgets.schemas import RepositoryBudgetsIO


class RepositoryOut(BaseModel):
    full_name: str
    installed: bool | None = Field(description="Whether the GitHub App is installed on it; null: not known.")
    private: bool | None = None
    enabled: bool
    coder: bool
    reviewer: bool
    autofix: bool
    budgets: RepositoryBudgetsIO = Field(default_factory=RepositoryBudgetsIO)


class RepositoriesOut(BaseModel):
    repositories: list[RepositoryOut]
    installations: str = Field(
        description="ok, 'not configured' (no GitHub App: only enabled repositories are listed), or why "
        "the App's installations could not be read."
    )


class RepositoryIn(BaseModel):
    """Which agents work on the repository (a PUT enables it)."""

    model_config = ConfigDict(extra="forbid")

    coder: bool = True
    reviewer: bool = False
    autofix: bool = False
    budgets: RepositoryBudgetsIO = Field(
        default_factory=RepositoryBudgetsIO, description="Overrides of the team's limits (empty: the team's)."
    )


class RepositoryAdd(RepositoryIn):
    """A repository to enable by its name (with a GitHub App, the App must be installed on it)."""

    full_name: str = Field(max_length=200, description="owner/name")
