"""The channel map: the one place that lists channels. The webhook endpoints, their
verification, the outbound clients and thread resolution are all read from it."""

from __future__ import annotations

from collections.abc import Mapping

from drydock.bus.envelopes import Channel
from drydock.channels.adapter import AnyAdapter
from drydock.channels.conversation import Conversation
from drydock.channels.github.adapter import ADAPTER as GITHUB
from drydock.channels.linear.adapter import ADAPTER as LINEAR
from drydock.channels.slack.adapter import ADAPTER as SLACK

CHANNELS: Mapping[Channel, AnyAdapter] = {adapter.channel: adapter for adapter in (GITHUB, LINEAR, SLACK)}
"""Each external channel's adapter by its :class:`~drydock.bus.envelopes.Channel`."""


def thread_id(conversation: Conversation) -> str:
    """The thread id of the conversation's canonical key, by its channel's adapter."""
    return CHANNELS[conversation.source].thread_id(conversation)
