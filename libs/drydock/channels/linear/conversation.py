"""A Linear conversation: an issue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from drydock.bus.envelopes import Channel
from drydock.channels.conversation import Conversation
from drydock.threads import ids


@dataclass(frozen=True)
class LinearConversation(Conversation):
    source: ClassVar[Channel] = Channel.LINEAR

    organization: str
    issue_id: str


def thread_key(conversation: LinearConversation) -> str:
    return ids.linear_issue_key(conversation.organization, conversation.issue_id)
