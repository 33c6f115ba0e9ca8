"""The profile API's shapes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from drydock.accounts import Provider
from drydock.accounts.link_codes import LINKABLE


def _linkable(provider: Provider) -> Provider:
    if provider not in LINKABLE:
        raise ValueError(f"choose {' or '.join(linkable.value for linkable in LINKABLE)}")
    return provider


Linkable = Annotated[Provider, AfterValidator(_linkable)]
"""A provider whose accounts link with a one-time code (GitHub links by signing in)."""


class Identity(BaseModel):
    """An external account linked to the Drydock user."""

    provider: Provider
    external_id: str


class PendingLink(BaseModel):
    """A link code issued and not yet sent from the account: it confers nothing."""

    provider: Linkable
    expires_at: datetime


class ProfileOut(BaseModel):
    user_id: str
    default_repository: str | None
    model: str | None = Field(description="The model override; null: the team default.")
    effort: str | None = Field(description="The reasoning-effort override.")
    branch_prefix: str | None
    draft_prs: bool
    auto_open_pr: bool
    autofix: bool
    plan_approval: bool = Field(description="Your threads' changes wait for your approval of the coder's plan.")
    identities: list[Identity] = Field(description="Linked (verified) GitHub, Slack and Linear accounts.")
    pending: list[PendingLink] = Field(description="Slack and Linear links waiting for their code.")


class ProfileIn(BaseModel):
    """The whole editable profile (a PUT replaces it)."""

    model_config = ConfigDict(extra="forbid")

    default_repository: str | None = Field(default=None, max_length=200, description="owner/name")
    model: str | None = Field(default=None, max_length=100)
    effort: str | None = Field(default=None, max_length=20)
    branch_prefix: str | None = Field(default=None, max_length=100)
    draft_prs: bool = False
    auto_open_pr: bool = True
    autofix: bool = False
    plan_approval: bool = False


class LinkCodeIn(BaseModel):
    """Which kind of account to link."""

    model_config = ConfigDict(extra="forbid")

    provider: Linkable


class LinkCodeOut(BaseModel):
    """A one-time code to send from the account to link; shown once."""

    provider: Linkable
    code: str
    expires_at: datetime
    instructions: str = Field(description="Where to send the code, in words.")
