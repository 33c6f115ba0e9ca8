"""A Slack conversation: a thread."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from drydock.bus.envelopes import Channel
from drydock.channels.conversation import Conversation
from drydock.threads import ids


@dataclass(frozen=True)
class SlackConversation(Conversation):
    """A Slack thread; a top-level message starts one at its own ``ts``."""

    source: ClassVar[Channel] = Channel.SLACK

    team: str
    channel: str
    thread_ts: str


def thread_key(conversation: SlackConversation) -> str:
    return ids.slack_thread_key(conversation.team, conversation.channel, conversation.thread_ts)
