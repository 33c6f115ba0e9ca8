"""What the accounts store holds: linked accounts, user profiles, team defaults and enabled
repositories. A profile is a Redis hash; team defaults and repository settings are one JSON
string each (read on every webhook, so one short reply to parse), written whole."""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum

from pathspec import PathSpec
from pydantic import BaseModel, ConfigDict, Field, field_validator

from drydock.roles import Role

REPOSITORY_PATTERN = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
ORGANIZATION_PATTERN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?")
HANDLE_PATTERN = re.compile(r"@[A-Za-z0-9][A-Za-z0-9_.-]*")


class Provider(StrEnum):
    """An external system whose accounts can be linked to a Drydock user."""

    GITHUB = "github"
    SLACK = "slack"
    LINEAR = "linear"


_DOTS = frozenset({".", ".."})


def repository_name(value: str) -> str:
    """Validate ``owner/name``; raise ``ValueError`` with the reason."""
    if not REPOSITORY_PATTERN.fullmatch(value):
        raise ValueError(f"{value!r} is not a repository name of the form owner/name")
    owner, name = value.split("/")
    if owner in _DOTS or name in _DOTS:
        raise ValueError(f"{value!r} is not a repository name of the form owner/name")
    return value


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


BRANCH_PREFIX_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")


class UserProfile(Record):
    """A Drydock user's preferences: the ingress reads the default repository, the workers the
    model override and the behaviour flags (DESIGN.md section 7: flags live here, not in webhook
    code). Model ids and efforts are checked against the catalog when a run resolves them."""

    user_id: str = Field(min_length=1)
    default_repository: str | None = None
    model: str | None = Field(default=None, description="The user's model override; unset: the team default.")
    effort: str | None = Field(default=None, description="The user's reasoning-effort override.")
    branch_prefix: str | None = Field(default=None, description="Prefix of the agent's branches; unset: drydock/.")
    draft_prs: bool = Field(default=False, description="Open pull requests as drafts.")
    auto_open_pr: bool = Field(default=True, description="The agent may open pull requests without being asked.")
    autofix: bool = Field(default=False, description="Keep this user's agent pull requests green automatically.")
    plan_approval: bool = Field(
        default=False, description="The coder posts a plan and changes nothing until this user approves it."
    )

    @field_validator("default_repository")
    @classmethod
    def _repository(cls, value: str | None) -> str | None:
        return None if value is None else repository_name(value)

    @field_validator("branch_prefix")
    @classmethod
    def _branch_prefix(cls, value: str | None) -> str | None:
        if value is not None and (not BRANCH_PREFIX_PATTERN.fullmatch(value) or ".." in value):
            raise ValueError(f"{value!r} is not a usable branch prefix")
        return value

    @classmethod
    def from_hash(cls, user_id: str, raw: Mapping[str, str]) -> UserProfile:
        fields: dict[str, object] = {name: raw.get(name) or None for name in _TEXTS}
        fields |= {name: raw[name] == "1" for name in _FLAGS if name in raw}
        return cls.model_validate({"user_id": user_id, **fields})

    def to_hash(self) -> dict[str, str]:
        texts = {name: getattr(self, name) or "" for name in _TEXTS}
        return texts | {name: "1" if getattr(self, name) else "0" for name in _FLAGS}


_TEXTS = ("default_repository", "model", "effort", "branch_prefix")
_FLAGS = ("draft_prs", "auto_open_pr", "autofix", "plan_approval")


class RoleModel(Record):
    """The team's default model and effort for one role; either may be unset."""

    model: str | None = None
    effort: str | None = None


def _positive(value: float | int | None, what: str) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"{what} must be above zero (leave it empty for no limit), not {value}")


class RepositoryBudgets(Record):
    """Limits a repository sets for itself; each unset one falls back to the team's."""

    run_usd: float | None = Field(default=None, description="Spend per run, in US dollars.")
    run_model_calls: int | None = Field(default=None, description="Model calls per run (the step limit).")
    repository_day_usd: float | None = Field(
        default=None, description="Spend per repository per day (UTC), in US dollars."
    )

    @field_validator("run_usd", "run_model_calls", "repository_day_usd")
    @classmethod
    def _above_zero(cls, value: float | int | None) -> float | int | None:
        _positive(value, "a limit")
        return value


class TeamBudgets(RepositoryBudgets):
    """The team's limits: the defaults of every repository, and the ones only a team has."""

    user_day_usd: float | None = Field(default=None, description="Spend per user per day (UTC), in US dollars.")
    active_runs: int | None = Field(default=None, description="Runs going on at once in the whole team.")

    @field_validator("user_day_usd", "active_runs")
    @classmethod
    def _team_above_zero(cls, value: float | int | None) -> float | int | None:
        _positive(value, "a limit")
        return value


class TeamDefaults(Record):
    """Settings of the whole installation: who may trigger work, how the agent is addressed,
    and the repository used when a request names none."""

    default_repository: str | None = None
    allowed_organizations: tuple[str, ...] = ()
    mention_handle: str | None = Field(default=None, description="e.g. '@drydock'; unset: the ingress default.")
    models: dict[str, RoleModel] = Field(
        default_factory=dict, description="Default model and effort per role (coder, reviewer, analyzer)."
    )
    budgets: TeamBudgets = Field(default_factory=TeamBudgets, description="Spend, call and concurrency limits.")

    @field_validator("default_repository")
    @classmethod
    def _repository(cls, value: str | None) -> str | None:
        return None if value is None else repository_name(value)

    @field_validator("allowed_organizations")
    @classmethod
    def _organizations(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for org in value:
            if not ORGANIZATION_PATTERN.fullmatch(org):
                raise ValueError(f"{org!r} is not a GitHub organization name")
        return tuple(dict.fromkeys(org.lower() for org in value))

    @field_validator("models")
    @classmethod
    def _roles(cls, value: dict[str, RoleModel]) -> dict[str, RoleModel]:
        known = {role.value for role in Role}
        for name in value:
            if name not in known:
                raise ValueError(f"{name!r} is not a role ({', '.join(sorted(known))})")
        return value

    @field_validator("mention_handle")
    @classmethod
    def _handle(cls, value: str | None) -> str | None:
        if value is not None and not HANDLE_PATTERN.fullmatch(value):
            raise ValueError(f"{value!r} is not a handle of the form @name")
        return value

    @classmethod
    def from_json(cls, raw: str | None) -> TeamDefaults:
        """The stored record; defaults when there is none."""
        return cls() if not raw else cls.model_validate_json(raw)


DEFAULT_PROTECTED_PATHS = (".github/workflows/**",)
MAX_PROTECTED_PATHS = 50


class RepositorySettings(Record):
    """An enabled repository, which agents work on it, and what a push there needs approved."""

    full_name: str
    coder: bool = True
    reviewer: bool = False
    autofix: bool = False
    budgets: RepositoryBudgets = Field(default_factory=RepositoryBudgets, description="Overrides of the team's limits.")
    plan_approval: bool = Field(
        default=False, description="The coder posts a plan and changes nothing until the thread's owner approves it."
    )
    protected_paths: tuple[str, ...] = Field(
        default=DEFAULT_PROTECTED_PATHS,
        description="Paths (gitignore patterns) whose change in a push waits for the thread owner's approval.",
    )

    @field_validator("full_name")
    @classmethod
    def _repository(cls, value: str) -> str:
        return repository_name(value)

    @field_validator("protected_paths")
    @classmethod
    def _protected(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        cleaned = tuple(dict.fromkeys(p.strip() for p in value if p.strip()))
        if len(cleaned) > MAX_PROTECTED_PATHS:
            raise ValueError(f"at most {MAX_PROTECTED_PATHS} protected path patterns")
        for pattern in cleaned:
            if len(pattern) > 200 or any(ch in pattern for ch in "\n\r\0"):
                raise ValueError(f"{pattern[:40]!r} is not a usable path pattern")
            try:
                PathSpec.from_lines("gitignore", [pattern])
            except ValueError as error:
                raise ValueError(f"{pattern!r} is not a gitignore pattern: {error}") from None
        return cleaned

    @classmethod
    def from_json(cls, raw: str | None) -> RepositorySettings | None:
        """The stored record; ``None`` when there is none (the repository is not enabled)."""
        return None if not raw else cls.model_validate_json(raw)


class UserIdentity(Record):
    """Who a Drydock user is, as they last signed in to the dashboard: for display and for the
    administrator check, never for authorization on its own."""

    user_id: str = Field(min_length=1)
    provider: str = Field(description="github, oidc or dev.")
    login: str = Field(min_length=1)
    name: str = ""
    avatar_url: str = ""

    def to_hash(self) -> dict[str, str]:
        return self.model_dump(exclude={"user_id"})

    @classmethod
    def from_hash(cls, user_id: str, raw: Mapping[str, str]) -> UserIdentity | None:
        """The stored identity; ``None`` when the user never signed in to the dashboard."""
        return cls.model_validate({"user_id": user_id, **raw}) if raw.get("login") else None
