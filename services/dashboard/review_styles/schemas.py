"""The review-styles API's shapes: a repository's review guidelines and their versions."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class RuleIO(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=2000)
    category: str | None = Field(default=None, max_length=60)
    sources: int = Field(default=0, description="How many pieces of evidence the rule cites (read-only).")


class VersionOut(BaseModel):
    version: int
    rules: list[RuleIO]
    mode: str = Field(description="bootstrap, continual or edit.")
    summary: str
    based_on: int | None
    edited_by: str | None
    created_at: datetime
    approval: str = Field(description="pending, approved or rejected.")
    approved_by: str | None
    approved_at: datetime | None
    note: str


class AnalyzerOut(BaseModel):
    """The analyzer's thread for a repository, as it is now."""

    thread_id: str
    state: str = Field(
        description="queued (asked, no run yet), running, done (its last run completed or hit its step "
        "limit), failed or stopped."
    )
    url: str = Field(description="The thread's dashboard page.")


class ReviewStyleOut(BaseModel):
    repository: str
    current: int | None = Field(description="The version the reviewer applies: the newest approved one.")
    bootstrap: str | None = Field(description="The analyzer's bootstrap: requested, insufficient, done; null: never.")
    analyzer: AnalyzerOut | None = Field(default=None, description="The analyzer's thread; null: never asked.")
    versions: list[VersionOut] = Field(description="Newest first.")


class ReviewStyleSummary(BaseModel):
    repository: str
    reviewer: bool
    current: int | None
    latest: int | None
    pending: int = Field(description="Versions waiting for approval.")
    analyzer: AnalyzerOut | None = Field(default=None, description="The analyzer's thread; null: never asked.")


class EditIn(BaseModel):
    """A person's own version of the rules (approved by them)."""

    model_config = ConfigDict(extra="forbid")

    rules: list[RuleIO] = Field(min_length=1, max_length=100)
    based_on: int | None = Field(default=None, ge=1)


class DecisionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str = Field(default="", max_length=2000)


class BootstrapOut(BaseModel):
    repository: str
    thread_id: str = Field(description="The analyzer's thread for the repository.")
