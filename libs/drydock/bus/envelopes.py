"""Versioned envelopes carried on the bus.

Each envelope has a version field ``v``. A change that old readers cannot parse gets a new
version number, and readers keep accepting the previous one until no stream holds it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from drydock.roles import Role


def utcnow() -> datetime:
    return datetime.now(UTC)


class Channel(StrEnum):
    """Where a message came from, and where its replies go."""

    GITHUB = "github"
    LINEAR = "linear"
    SLACK = "slack"
    DASHBOARD = "dashboard"
    AUTOFIX = "autofix"
    SCHEDULER = "scheduler"


class EventType(StrEnum):
    STARTED = "started"
    MODEL_CALL = "model_call"
    TOOL_CALL = "tool_call"
    MESSAGE_POSTED = "message_posted"
    COMPLETED = "completed"
    STEP_LIMIT = "step_limit"
    STOPPED = "stopped"
    """The run ended early because someone asked it to stop (the dashboard's stop button)."""
    ERROR = "error"
    PROXY_DENIED = "proxy_denied"
    """The credential proxy refused a sandbox request its grant does not allow (e.g. a reviewer push)."""
    AUTOFIX = "autofix"
    """A decision of the autofix controller on one of the thread's pull requests, with its rule and reason."""
    PLAN_SUBMITTED = "plan_submitted"
    """The coder submitted a plan; it is held until the thread's owner approves it (plan approval)."""
    PUSH_HELD = "push_held"
    """The credential proxy held a push that changes protected paths until the thread's owner approves it."""
    APPROVED = "approved"
    """The thread's owner approved its held plan or held pushes."""


class Trigger(StrEnum):
    """Why an inbound message reached its thread."""

    MENTION = "mention"
    """The text mentions the agent's handle."""
    DIRECT = "direct"
    """The event itself addresses the agent: a Slack mention or direct message, a Linear agent session."""
    FOLLOW_UP = "follow_up"
    """A reply in a thread the agent is already part of."""
    CONTEXT = "context"
    """A comment without a mention on an issue the agent works on: read at the next run, wakes nothing."""
    REVIEW_REQUEST = "review_request"
    """A pull request opened, marked ready, or pushed to, on a repository with review enabled."""
    PUSH = "push"
    """Someone else pushed to the agent's branch."""
    REPAIR = "repair"
    """The autofix controller asks for a repair run: a failing check, a merge conflict or review feedback
    on the agent's pull request. The thread's pushes are gated by the confidence it reports."""


class Envelope(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class Author(Envelope):
    """Who wrote a message: the source's account, and the Drydock user when linked."""

    channel: Channel
    external_id: str
    name: str
    user_id: str | None = None


class ReplyAddress(Envelope):
    """Enough for the channel's client to answer in the right place (issue, Slack thread, …)."""

    channel: Channel
    address: dict[str, str] = Field(default_factory=dict)


class InboxMessage(Envelope):
    """One inbound message for a thread, stored in order on ``drydock.inbox.{thread_id}``."""

    v: Literal[1] = 1
    delivery_id: str = Field(min_length=1, description="The source's delivery id; de-duplicates redeliveries.")
    thread_id: str
    channel: Channel
    author: Author
    text: str
    repository: str | None = Field(default=None, description="owner/name on the code host")
    references: dict[str, str] = Field(default_factory=dict)
    reply_to: ReplyAddress
    received_at: datetime = Field(default_factory=utcnow)
    trigger: Trigger | None = Field(default=None, description="Why the message reached the thread.")


class Wake(Envelope):
    """A signal that a thread of a role has work: the worker reads the inbox itself."""

    v: Literal[1] = 1
    thread_id: str
    role: Role
    reason: str = "inbox"
    requested_at: datetime = Field(default_factory=utcnow)


class RunEvent(Envelope):
    """What a run did, on ``drydock.event.{thread_id}.{type}``."""

    v: Literal[1] = 1
    thread_id: str
    run_id: str
    type: EventType
    at: datetime = Field(default_factory=utcnow)
    data: dict[str, Any] = Field(default_factory=dict)


class GithubEvent(Envelope):
    """A CI or pull-request event for the autofix controller, on ``drydock.github.{event}``."""

    v: Literal[1] = 1
    delivery_id: str = Field(min_length=1)
    event: str
    action: str | None = None
    repository: str
    payload: dict[str, Any]
    received_at: datetime = Field(default_factory=utcnow)
