"""The GitHub channel as the rest of Drydock sees it (:class:`~drydock.channels.adapter.ChannelAdapter`)."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from drydock.bus.envelopes import Channel
from drydock.channels.adapter import ChannelAdapter, ChannelClients, Webhook, secret
from drydock.channels.github import conversation, parse
from drydock.channels.github import verify as signature
from drydock.channels.github.conversation import GithubConversation
from drydock.channels.github.reply import GithubReplies
from drydock.channels.github.status import GithubStatus
from drydock.channels.intents import Delivery
from drydock.config import GithubSettings, Settings
from drydock.github import GithubClient


def _settings(settings: Settings) -> GithubSettings:
    return settings.github


def _verify(section: GithubSettings, headers: Mapping[str, str], body: bytes) -> None:
    key = secret(section.webhook_secret, "DRYDOCK_GITHUB_WEBHOOK_SECRET")
    signature.verify(key, body, headers.get(signature.SIGNATURE_HEADER))


def _parse(section: GithubSettings, headers: Mapping[str, str], body: bytes) -> Delivery:
    return parse.parse(headers, body, host=section.host, app_slug=section.app_slug)


def _clients(section: GithubSettings, transport: httpx.AsyncBaseTransport | None) -> ChannelClients | None:
    if section.app_id is None or section.private_key is None:
        return None
    client = GithubClient(section, transport=transport)
    return ChannelClients(client, GithubReplies(client), GithubStatus(client), client.aclose)


ADAPTER: ChannelAdapter[GithubSettings, GithubConversation] = ChannelAdapter(
    channel=Channel.GITHUB,
    settings=_settings,
    verify=_verify,
    webhooks=(Webhook("/webhooks/github", "GitHub App webhook", _parse),),
    conversation=GithubConversation,
    thread_key=conversation.thread_key,
    clients=_clients,
    reply_tool="github_comment",
)
