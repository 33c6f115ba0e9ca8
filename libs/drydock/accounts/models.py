"""What the accounts store holds: linked accounts, user profiles, team defaults and enabled
repositories. A profile is a Redis hash; team defaults and repository settings are one JSON
string each (read on every webhook, so one short reply to parse), written whole."""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

REPOSITORY_PATTERN = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
ORGANIZATION_PATTERN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?$")
HANDLE_PATTERN = re.compile(r"^@[A-Za-z0-9][A-Za-z0-9_.-]*$")


class Provider(StrEnum):
    """An external system whose accounts can be linked to a Drydock user."""

    GITHUB = "github"
    SLACK = "slack"
    LINEAR = "linear"


def repository_name(value: str) -> str:
    """Validate ``owner/name``; raise ``ValueError`` with the reason."""
    if not REPOSITORY_PATTERN.match(value) or any(part in {".", ".."} for part in value.split("/")):
        raise ValueError(f"{value!r} is not a repository name of the form owner/name")
    return value


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class UserProfile(Record):
    """A Drydock user's preferences that the ingress needs."""

    user_id: str = Field(min_length=1)
    default_repository: str | None = None

    @field_validator("default_repository")
    @classmethod
    def _repository(cls, value: str | None) -> str | None:
        return None if value is None else repository_name(value)

    @classmethod
    def from_hash(cls, user_id: str, raw: Mapping[str, str]) -> UserProfile:
        return cls(user_id=user_id, default_repository=raw.get("default_repository") or None)

    def to_hash(self) -> dict[str, str]:
        return {"default_repository": self.default_repository or ""}


class TeamDefaults(Record):
    """Settings of the whole installation: who may trigger work, how the agent is addressed,
    and the repository used when a request names none."""

    default_repository: str | None = None
    allowed_organizations: tuple[str, ...] = ()
    mention_handle: str | None = Field(default=None, description="e.g. '@drydock'; unset: the ingress default.")

    @field_validator("default_repository")
    @classmethod
    def _repository(cls, value: str | None) -> str | None:
        return None if value is None else repository_name(value)

    @field_validator("allowed_organizations")
    @classmethod
    def _organizations(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for org in value:
            if not ORGANIZATION_PATTERN.match(org):
                raise ValueError(f"{org!r} is not a GitHub organization name")
        return tuple(dict.fromkeys(org.lower() for org in value))

    @field_validator("mention_handle")
    @classmethod
    def _handle(cls, value: str | None) -> str | None:
        if value is not None and not HANDLE_PATTERN.match(value):
            raise ValueError(f"{value!r} is not a handle of the form @name")
        return value

    @classmethod
    def from_json(cls, raw: str | None) -> TeamDefaults:
        """The stored record; defaults when there is none."""
        return cls() if not raw else cls.model_validate_json(raw)


class RepositorySettings(Record):
    """An enabled repository and which agents work on it."""

    full_name: str
    coder: bool = True
    reviewer: bool = False
    autofix: bool = False

    @field_validator("full_name")
    @classmethod
    def _repository(cls, value: str) -> str:
        return repository_name(value)

    @classmethod
    def from_json(cls, raw: str | None) -> RepositorySettings | None:
        """The stored record; ``None`` when there is none (the repository is not enabled)."""
        return None if not raw else cls.model_validate_json(raw)
