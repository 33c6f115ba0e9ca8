"""What a verified delivery asks for, as each channel's ``parse`` reports it.

Parsing is pure: it reads the body and headers and names the conversation, the sender and the
text, but decides nothing that needs storage (is the author linked? does the thread exist?).
The ingress routes each intent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from drydock.bus.envelopes import Channel, GithubEvent, ReplyAddress
from drydock.channels.conversation import Conversation
from drydock.channels.github.conversation import GithubConversation


@dataclass(frozen=True)
class Sender:
    """Who wrote the message, as the source names them."""

    channel: Channel
    external_id: str
    name: str
    bot: bool = False
    agent: bool = False
    """The agent itself (the Drydock App's bot account); implies ``bot``."""
    association: str | None = None
    """GitHub's ``author_association`` (OWNER, MEMBER, COLLABORATOR, …)."""


@dataclass(frozen=True)
class Message:
    """A human message that may start or continue a coder thread."""

    delivery_id: str
    event: str
    conversation: Conversation
    sender: Sender
    text: str
    reply_to: ReplyAddress
    addressed: bool = False
    """The event itself addresses the agent (Slack mention or direct message, Linear agent
    session); otherwise only a mention of the handle or an existing thread makes it a trigger."""
    repository: str | None = None
    """``owner/name`` when the event belongs to a repository (GitHub)."""
    references: Mapping[str, str] = field(default_factory=dict)
    follow_up_only: bool = False
    own_words: str | None = None
    """What the person wrote, when ``text`` is a wider context (a Linear session's prompt context
    holds the issue too); commands such as ``link CODE`` are read from it."""
    """Only continue an existing thread, never start one (e.g. a button press)."""
    written_at: datetime | None = None
    """When its author wrote it, as the source says (a GitHub comment's or review's time, a
    Linear comment's or prompt's): an approval in it covers only what was held by then. GitHub
    signs no delivery time and Linear's allows a minute, so a replayed message keeps its old
    time. Slack gives none: its signed event id makes a replay a duplicate."""


@dataclass(frozen=True)
class ReviewRequest:
    """A pull request that may need the reviewer: opened, ready for review, or pushed to."""

    delivery_id: str
    event: str
    conversation: GithubConversation
    sender: Sender
    action: str
    title: str
    draft: bool
    head_sha: str
    reply_to: ReplyAddress
    references: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BranchPush:
    """Commits pushed to a branch; only agent branches matter (they continue the creating thread)."""

    delivery_id: str
    event: str
    host: str
    owner: str
    repo: str
    branch: str
    head_sha: str
    sender: Sender
    text: str
    reply_to: ReplyAddress

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"


@dataclass(frozen=True)
class Forward:
    """A CI or pull-request event for the autofix controller."""

    event: GithubEvent


Intent = Message | ReviewRequest | BranchPush | Forward


DELIVERY_PENDING = "pending"
DELIVERY_DONE = "done"
"""What the ingress's de-duplication key of a delivery (``Keys.delivery``) holds: claimed while
it is routed, then done once every publish of it was acknowledged."""


@dataclass(frozen=True)
class Delivery:
    """A verified, parsed delivery: its id for de-duplication and what it asks for."""

    channel: Channel
    delivery_id: str
    event: str
    intents: tuple[Intent, ...] = ()
    ignored: str | None = None
    """Why nothing is routed, for the log line; ``None`` when there are intents."""
    challenge: str | None = None
    """Slack's ``url_verification`` challenge, answered as is."""
    identity: str | None = None
    """The delivered object's own identity, read from the signed body (the event, the action and
    the comment's, review's, issue's, agent session's or prompt's id), for the events that carry
    one: the delivery id header is not signed, so a captured body sent again under a new id is
    known by this. Slack needs none (its signed ``event_id`` is the delivery id)."""
