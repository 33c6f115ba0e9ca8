"""Team defaults: the default model and effort per role, the allowed GitHub organizations, the
mention handle, the default repository and the budgets. Everyone signed in may read them; administrators
change them."""

from __future__ import annotations

from pydantic import ValidationError

from drydock.accounts import RoleModel, TeamDefaults
from drydock.roles import Role
from services.dashboard.budgets.schemas import TeamBudgetsIO
from services.dashboard.choices import blank_to_none, model_errors
from services.dashboard.context import Dashboard
from services.dashboard.errors import FieldError, Invalid
from services.dashboard.team.schemas import RoleModelIO, TeamIO


def _out(team: TeamDefaults) -> TeamIO:
    return TeamIO(
        default_repository=team.default_repository,
        allowed_organizations=list(team.allowed_organizations),
        mention_handle=team.mention_handle,
        models={
            Role(role): RoleModelIO(model=choice.model, effort=choice.effort) for role, choice in team.models.items()
        },
        budgets=TeamBudgetsIO.of(team.budgets),
    )


class Team:
    def __init__(self, dashboard: Dashboard) -> None:
        self._accounts = dashboard.accounts
        self._catalog = dashboard.catalog

    async def get(self) -> TeamIO:
        return _out(await self._accounts.team())

    async def save(self, change: TeamIO) -> TeamIO:
        """Replace the team defaults; :class:`Invalid` names each wrong field."""
        errors: list[FieldError] = []
        models: dict[str, RoleModel] = {}
        for role, choice in change.models.items():
            model, effort = blank_to_none(choice.model), blank_to_none(choice.effort)
            errors += model_errors(self._catalog, model, effort, at=("body", "models", role.value))
            if model or effort:
                models[role.value] = RoleModel(model=model, effort=effort)
        try:
            team = TeamDefaults(
                default_repository=blank_to_none(change.default_repository),
                allowed_organizations=tuple(org.strip() for org in change.allowed_organizations if org.strip()),
                mention_handle=blank_to_none(change.mention_handle),
                models=models,
                budgets=change.budgets.record(),
            )
        except ValidationError as error:
            raise Invalid([*errors, *Invalid.from_validation(error).errors]) from None
        if errors:
            raise Invalid(errors)
        await self._accounts.save_team(team)
        return _out(team)
