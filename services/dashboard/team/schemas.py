"""The team-defaults API's shapes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from drydock.roles import Role
from services.dashboard.budgets.schemas import TeamBudgetsIO


class RoleModelIO(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(default=None, max_length=100)
    effort: str | None = Field(default=None, max_length=20)


class TeamIO(BaseModel):
    """Settings of the whole installation."""

    model_config = ConfigDict(extra="forbid")

    default_repository: str | None = Field(default=None, max_length=200, description="owner/name")
    allowed_organizations: list[str] = Field(
        default_factory=list, max_length=100, description="GitHub organizations whose members may trigger work."
    )
    mention_handle: str | None = Field(default=None, max_length=100, description="e.g. @drydock")
    models: dict[Role, RoleModelIO] = Field(default_factory=dict, description="Default model and effort per role.")
    budgets: TeamBudgetsIO = Field(default_factory=TeamBudgetsIO, description="Spend, call and concurrency limits.")
