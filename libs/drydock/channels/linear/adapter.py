"""The Linear channel as the rest of Drydock sees it (:class:`~drydock.channels.adapter.ChannelAdapter`)."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from drydock.bus.envelopes import Channel
from drydock.channels.adapter import ChannelAdapter, ChannelClients, Webhook, secret
from drydock.channels.intents import Delivery
from drydock.channels.linear import conversation, parse
from drydock.channels.linear import verify as signature
from drydock.channels.linear.client import LinearClient
from drydock.channels.linear.conversation import LinearConversation
from drydock.channels.linear.reply import LinearReplies
from drydock.channels.linear.status import LinearStatus
from drydock.channels.payload import load_json
from drydock.config import LinearSettings, Settings


def _settings(settings: Settings) -> LinearSettings:
    return settings.linear


def _verify(section: LinearSettings, headers: Mapping[str, str], body: bytes) -> None:
    key = secret(section.webhook_secret, "DRYDOCK_LINEAR_WEBHOOK_SECRET")
    signature.verify_signature(key, body, headers.get(signature.SIGNATURE_HEADER))
    signature.verify_timestamp(load_json(body), tolerance=section.timestamp_tolerance)


def _parse(section: LinearSettings, headers: Mapping[str, str], body: bytes) -> Delivery:
    return parse.parse(headers, body, agent_user_id=section.agent_user_id)


def _clients(section: LinearSettings, transport: httpx.AsyncBaseTransport | None) -> ChannelClients | None:
    if section.api_key is None:
        return None
    client = LinearClient(section, transport=transport)
    return ChannelClients(client, LinearReplies(client), LinearStatus(client), client.aclose)


ADAPTER: ChannelAdapter[LinearSettings, LinearConversation] = ChannelAdapter(
    channel=Channel.LINEAR,
    settings=_settings,
    verify=_verify,
    webhooks=(Webhook("/webhooks/linear", "Linear webhook", _parse),),
    conversation=LinearConversation,
    thread_key=conversation.thread_key,
    clients=_clients,
    reply_tool="linear (action comment)",
)
