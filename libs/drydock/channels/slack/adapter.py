"""The Slack channel as the rest of Drydock sees it (:class:`~drydock.channels.adapter.ChannelAdapter`)."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from drydock.bus.envelopes import Channel
from drydock.channels.adapter import ChannelAdapter, ChannelClients, Webhook, secret
from drydock.channels.intents import Delivery
from drydock.channels.slack import conversation, parse
from drydock.channels.slack import verify as signature
from drydock.channels.slack.client import SlackClient
from drydock.channels.slack.conversation import SlackConversation
from drydock.channels.slack.reply import SlackReplies
from drydock.channels.slack.status import SlackStatus
from drydock.config import Settings, SlackSettings


def _settings(settings: Settings) -> SlackSettings:
    return settings.slack


def _verify(section: SlackSettings, headers: Mapping[str, str], body: bytes) -> None:
    signature.verify(
        secret(section.signing_secret, "DRYDOCK_SLACK_SIGNING_SECRET"),
        body,
        timestamp=headers.get(signature.TIMESTAMP_HEADER),
        header=headers.get(signature.SIGNATURE_HEADER),
        tolerance=section.timestamp_tolerance,
    )


def _event(section: SlackSettings, headers: Mapping[str, str], body: bytes) -> Delivery:
    return parse.parse_event(headers, body, bot_user_id=section.bot_user_id)


def _interaction(section: SlackSettings, headers: Mapping[str, str], body: bytes) -> Delivery:
    return parse.parse_interaction(headers, body)


def _clients(section: SlackSettings, transport: httpx.AsyncBaseTransport | None) -> ChannelClients | None:
    # slack_sdk's client has its own HTTP stack: a test points it at the fake by api_url.
    if section.bot_token is None:
        return None
    client = SlackClient(section)
    replies = SlackReplies(client)
    return ChannelClients(client, replies, SlackStatus(client), client.aclose, buttons=replies)


ADAPTER: ChannelAdapter[SlackSettings, SlackConversation] = ChannelAdapter(
    channel=Channel.SLACK,
    settings=_settings,
    verify=_verify,
    webhooks=(
        Webhook("/webhooks/slack/events", "Slack Events API", _event),
        Webhook("/webhooks/slack/interactivity", "Slack interactivity", _interaction),
    ),
    conversation=SlackConversation,
    thread_key=conversation.thread_key,
    clients=_clients,
    reply_tool="slack_reply",
)
