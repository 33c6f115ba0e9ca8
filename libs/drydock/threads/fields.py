"""The names of thread metadata fields, spelled once for every service, and the fields a thread
starts with.

Other modules name them only to write through
:class:`~drydock.threads.metadata.ThreadMetadataStore` (a new thread's fields, ``update``,
``compare_and_set``) and read the typed :class:`~drydock.threads.metadata.ThreadMetadata`.
``kind`` is the thread's role; ``sandbox_id`` its sandbox or the creation sentinel; ``reply_to``
is the JSON of the source's :class:`ReplyAddress`, ``owner`` the triggering Drydock user (empty
when the author is trusted through an organization), and ``author`` the source account as
``channel:external id``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

from drydock.bus.envelopes import InboxMessage

KIND = "kind"
SANDBOX_ID = "sandbox_id"
"""The thread's sandbox id, or the creation sentinel while one is being created."""
CHANNEL = "channel"
REPLY_TO = "reply_to"
REPOSITORY = "repository"
OWNER = "owner"
AUTHOR = "author"
CREATED_AT = "created_at"
CREATED_BY = "created_by"
MODEL = "model"
"""The thread's own model choice (from the triggering event or the dashboard); empty: none."""
EFFORT = "effort"
STATE = "state"
"""What the thread is doing (:class:`ThreadState`); absent until its first run."""
LAST_ACTIVITY = "last_activity"
"""When the thread last changed state (ISO 8601): a run started or ended, a message was handed to it."""
OUTCOME = "outcome"
"""How its last finished run ended: ``completed``, ``step_limit``, ``failed`` or ``stopped``."""
TITLE = "title"
"""A short label for lists (the first line of a prompt from the dashboard); absent: derived from ``reply_to``."""


class ThreadState(StrEnum):
    """The values of the ``state`` field (:mod:`drydock.threads.states` says when each is set)."""

    QUEUED = "queued"
    RUNNING = "running"
    IDLE = "idle"
    FAILED = "failed"
    STOPPED = "stopped"


def new_thread_fields(message: InboxMessage, *, created_by: str) -> dict[str, str]:
    """The fields of a thread started by ``message`` (besides ``kind``)."""
    return {
        CHANNEL: message.channel.value,
        REPLY_TO: message.reply_to.model_dump_json(),
        REPOSITORY: message.repository or "",
        OWNER: message.author.user_id or "",
        AUTHOR: f"{message.author.channel.value}:{message.author.external_id}",
        CREATED_AT: datetime.now(UTC).isoformat(),
        CREATED_BY: created_by,
    }
