"""The threads API's shapes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

REPOSITORY = r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"


def _written(text: str) -> str:
    if not text.strip():
        raise ValueError("it is blank: write what the agent should do")
    return text


Written = Annotated[str, Field(min_length=1, max_length=20_000), AfterValidator(_written)]
"""Text for the agent: not blank."""


class CheckOut(BaseModel):
    name: str
    outcome: str = Field(description="The conclusion once completed (success, failure, …), else the status.")
    url: str | None = None


class AutofixOut(BaseModel):
    enabled: bool = Field(
        description="Whether the autofix loop repairs its failed checks, merge conflicts and change requests."
    )
    reason: str = Field(
        description="Which setting decides it: the pull request's override, else the owner's and the repository's."
    )


class PullRequestOut(BaseModel):
    repository: str
    number: int
    url: str
    state: str = Field(description="open, closed or merged: as GitHub says when the App may read it, else as recorded.")
    branch: str
    checks: list[CheckOut] | None = Field(
        default=None, description="The latest run of each check on its branch; null: not read (no GitHub App)."
    )
    checks_error: str | None = Field(default=None, description="Why the checks could not be read.")
    autofix: AutofixOut | None = Field(default=None, description="Whether autofix keeps it green; null in lists.")


class ThreadSummary(BaseModel):
    id: str
    kind: str = Field(description="coder, reviewer or analyzer.")
    channel: str | None = Field(description="Where the thread started: github, slack, linear, dashboard, …")
    repository: str | None
    owner: str | None = Field(description="The Drydock user who started it, when known.")
    owner_login: str | None = None
    state: str | None = Field(description="queued, running, idle, failed or stopped; null: no run yet.")
    outcome: str | None = Field(
        default=None, description="How its last finished run ended: completed, step_limit, failed or stopped."
    )
    title: str
    created_at: datetime | None
    last_activity: datetime | None = Field(
        default=None, description="When a run last started or ended, or a message was handed to it."
    )
    pull_request: PullRequestOut | None = Field(default=None, description="Its newest pull request, if any.")
    model: str | None = None
    effort: str | None = None


class ThreadList(BaseModel):
    threads: list[ThreadSummary]
    next_cursor: str | None = Field(description="Pass as cursor for the next page; null: no more.")


class MessageOut(BaseModel):
    seq: int
    author: str
    channel: str
    text: str
    received_at: datetime


class EventOut(BaseModel):
    seq: int = Field(description="The event's sequence; the live stream's event id.")
    type: str
    run_id: str
    at: datetime
    data: dict[str, Any]
    state: str | None = Field(default=None, description="The thread's state after this event, if it changes it.")


class SandboxOut(BaseModel):
    status: Literal["none", "creating", "ready", "gone"]
    id: str | None = None
    provider: str | None = None
    isolation: str | None = None
    created_at: datetime | None = None
    last_used_at: datetime | None = None


class FileChangeOut(BaseModel):
    path: str
    status: str = Field(description="git's letter: A added, M modified, D deleted, T type changed.")
    additions: int | None = Field(description="Lines added; null for a binary file.")
    deletions: int | None


class ChangesOut(BaseModel):
    base: str = Field(description="The commit the diff is against: where the branch left the default branch.")
    files: list[FileChangeOut]
    patch: str = Field(description="The unified diff, committed and uncommitted changes together.")
    truncated: bool = Field(description="The patch was cut short (the file list is whole).")
    at: datetime = Field(description="When it was read from the sandbox's git (the end of the last run).")


class ThreadDetail(ThreadSummary):
    messages: list[MessageOut]
    events: list[EventOut]
    pull_requests: list[PullRequestOut]
    sandbox: SandboxOut
    changed_files: list[str] = Field(
        description="Files the thread's checkout changed (from its git, as of the end of its last run); before "
        "the first run's end, the files the agent's write_file and edit_file calls named."
    )
    changes: ChangesOut | None = Field(default=None, description="The checkout's diff; null before a run ended.")
    stop_requested: bool
    budget_pause: str | None = Field(
        default=None, description="The budget the thread is paused at (its owner or an administrator continues it)."
    )


class ThreadCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repository: str = Field(max_length=200, description="owner/name; enabled for the coder.")
    prompt: Written
    model: str | None = Field(
        default=None, max_length=100, description="This thread's model; null: yours or the team's."
    )
    effort: str | None = Field(default=None, max_length=20)


class MessageCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: Written


class Accepted(BaseModel):
    thread_id: str
    state: str | None


class PlanOut(BaseModel):
    revision: int
    description: str
    todos: list[dict[str, str]]
    state: str = Field(description="held or approved")
    submitted_at: datetime
    approved_by: str = ""


class HeldPushOut(BaseModel):
    change: str = Field(description="The digest of the push's exact ref updates; approve it by this id.")
    repository: str
    refs: list[str] = Field(description="'old new ref' per updated ref")
    paths: list[str] = Field(description="The protected paths it changes")
    state: str = Field(description="held or approved")
    held_at: datetime
    approved_by: str = ""


class ApprovalsOut(BaseModel):
    """What waits for (or got) the thread owner's approval."""

    plan: PlanOut | None
    pushes: list[HeldPushOut]
    may_approve: bool = Field(description="Whether you own the thread (only its owner approves).")


class ApprovalCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    change: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="One held push to approve; null: the held plan and every held push.",
    )


class ApprovalResult(BaseModel):
    plan: int | None = Field(description="The plan revision approved, if one was held.")
    pushes: list[str] = Field(description="The held pushes approved (change ids).")
