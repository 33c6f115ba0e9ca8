"""The metadata fields the ingress writes when it starts a thread (besides ``kind``).

Workers read them: ``reply_to`` is the JSON of the source's :class:`ReplyAddress`, ``owner``
the triggering Drydock user (empty when the author is trusted through an organization), and
``author`` the source account as ``channel:external id``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from drydock.bus.envelopes import InboxMessage

CHANNEL = "channel"
REPLY_TO = "reply_to"
REPOSITORY = "repository"
OWNER = "owner"
AUTHOR = "author"
CREATED_AT = "created_at"
CREATED_BY = "created_by"


def new_thread_fields(message: InboxMessage) -> dict[str, str]:
    return {
        CHANNEL: message.channel.value,
        REPLY_TO: message.reply_to.model_dump_json(),
        REPOSITORY: message.repository or "",
        OWNER: message.author.user_id or "",
        AUTHOR: f"{message.author.channel.value}:{message.author.external_id}",
        CREATED_AT: datetime.now(UTC).isoformat(),
        CREATED_BY: "ingress",
    }
