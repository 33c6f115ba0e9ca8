"""What a channel is to the rest of Drydock: one :class:`ChannelAdapter` per channel package,
listed once in :data:`drydock.channels.registry.CHANNELS`.

An adapter says where the channel's settings are, which webhook paths it serves and how a
delivery is verified and parsed there, which clients answer on it, and which thread key a
conversation of it has. The ingress and :class:`~drydock.channels.outbound.Outbound` read
only the map.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import httpx
from pydantic import BaseModel, SecretStr

from drydock.bus.envelopes import Channel, InboxMessage, ReplyAddress
from drydock.channels.buttons import Button
from drydock.channels.conversation import Conversation
from drydock.channels.errors import ChannelNotConfigured
from drydock.channels.intents import Delivery
from drydock.channels.run_status import RunStatus
from drydock.config import Settings
from drydock.threads import ids

Section = TypeVar("Section", bound=BaseModel)
ConversationT = TypeVar("ConversationT", bound=Conversation)

Reader = Callable[[Settings, Mapping[str, str], bytes], Delivery]
"""A webhook endpoint's first step: verify and parse one delivery, raising a channel error."""


class Replies(Protocol):
    async def reply(self, address: ReplyAddress, text: str, *, effect: str | None = None) -> None: ...

    async def find_reply(self, address: ReplyAddress, effect: str) -> bool: ...

    async def acknowledge(self, message: InboxMessage) -> bool: ...


class StatusIndicator(Protocol):
    async def show(self, address: ReplyAddress, status: RunStatus, detail: str = "") -> dict[str, str]: ...


class Buttons(Protocol):
    async def reply_with_button(
        self, address: ReplyAddress, text: str, button: Button, *, effect: str | None = None
    ) -> None: ...


@dataclass(frozen=True)
class ChannelClients:
    """What answers on a channel whose credentials are configured."""

    client: object
    """The channel's API client, for callers that need more of its API (``Outbound.github``)."""
    replies: Replies
    status: StatusIndicator
    aclose: Callable[[], Awaitable[None]]
    buttons: Buttons | None = None
    """Set where messages can carry buttons (Approve, Continue); elsewhere the text says how."""


@dataclass(frozen=True)
class Webhook(Generic[Section]):
    """One webhook path of a channel and how its verified body is parsed."""

    path: str
    summary: str
    parse: Callable[[Section, Mapping[str, str], bytes], Delivery]


def secret(value: SecretStr | None, variable: str) -> bytes:
    """A webhook secret's bytes; :class:`ChannelNotConfigured` (404) naming ``variable`` when unset."""
    if value is None:
        raise ChannelNotConfigured(f"this channel is not configured here ({variable} is unset)")
    return value.get_secret_value().encode()


@dataclass(frozen=True)
class ChannelAdapter(Generic[Section, ConversationT]):
    """One channel, as its package declares it."""

    channel: Channel
    settings: Callable[[Settings], Section]
    """Its section of :class:`~drydock.config.Settings`."""
    verify: Callable[[Section, Mapping[str, str], bytes], None]
    """Raise ``ChannelNotConfigured`` without a secret, ``VerificationFailed`` unless the delivery
    is the source's; nothing of the body is interpreted before this passes."""
    webhooks: tuple[Webhook[Section], ...]
    conversation: type[ConversationT]
    thread_key: Callable[[ConversationT], str]
    """The conversation's canonical key (frozen: a thread id is the key's uuid5)."""
    clients: Callable[[Section, httpx.AsyncBaseTransport | None], ChannelClients | None]
    """The outbound clients, or ``None`` when the section lacks the credentials."""
    reply_tool: str
    """How the coder answers in this channel, as its prompt names it (a tool of ``drydock.tools``)."""

    def reader(self, webhook: Webhook[Section]) -> Reader:
        """Verify, then parse with ``webhook``, reading this channel's section of the settings."""

        def read(settings: Settings, headers: Mapping[str, str], body: bytes) -> Delivery:
            section = self.settings(settings)
            self.verify(section, headers, body)
            return webhook.parse(section, headers, body)

        return read

    def thread_id(self, conversation: ConversationT) -> str:
        """The thread id of the conversation's canonical key."""
        return ids.thread_id(self.thread_key(conversation))


AnyAdapter = ChannelAdapter[Any, Any]
