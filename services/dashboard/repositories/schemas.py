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
    plan_approval: bool = Field(description="The coder's changes wait for the thread owner's approval of its plan.")
    protected_paths: list[str] = Field(
        description="gitignore patterns; a push changing a match waits for the thread owner's approval."
    )


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
    plan_approval: bool = False
    protected_paths: list[str] | None = Field(
        default=None,
        max_length=50,
        description="gitignore patterns (at most 50); null: the default, .github/workflows/**; []: none.",
    )


class RepositoryAdd(RepositoryIn):
    """A repository to enable by its name (with a GitHub App, the App must be installed on it)."""

    full_name: str = Field(max_length=200, description="owner/name")
