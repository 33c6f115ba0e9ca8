"""Replies, pickup acknowledgements and status indicators for every configured channel of
:data:`drydock.channels.registry.CHANNELS`, chosen by the reply address's channel. A channel
without credentials raises :class:`ChannelNotConfigured` when used."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import httpx

from drydock.bus.envelopes import Channel, InboxMessage, ReplyAddress
from drydock.channels.adapter import Buttons, Replies, StatusIndicator
from drydock.channels.buttons import APPROVE_BUTTON, Button
from drydock.channels.errors import ChannelNotConfigured
from drydock.channels.linear.client import LinearClient
from drydock.channels.registry import CHANNELS
from drydock.channels.run_status import RunStatus
from drydock.config import Settings
from drydock.effects import Effects
from drydock.github import GithubClient
from drydock.threads.continuation import CONTINUE_ACTION

CONTINUE_BUTTON = Button(action_id=CONTINUE_ACTION, text="Continue", value="continue")
"""The button under a budget's pause notice; :mod:`drydock.threads.continuation` reads its press."""


class Outbound:
    def __init__(
        self,
        replies: dict[Channel, Replies],
        statuses: dict[Channel, StatusIndicator],
        closers: list[Callable[[], Awaitable[None]]],
        *,
        github: GithubClient | None = None,
        linear: LinearClient | None = None,
        buttons: dict[Channel, Buttons] | None = None,
    ) -> None:
        self._replies = replies
        self._buttons = buttons or {}
        self._statuses = statuses
        self._closers = closers
        self.github = github
        """The GitHub client, shared with callers that need more of GitHub's API."""
        self.linear = linear
        """The Linear client, shared with callers that need more of Linear's API."""

    @classmethod
    def from_settings(
        cls, settings: Settings, *, transports: Mapping[Channel, httpx.AsyncBaseTransport] | None = None
    ) -> Outbound:
        """Clients for each channel of the map whose credentials are configured; ``transports``
        carries a channel's HTTP to a test double."""
        replies: dict[Channel, Replies] = {}
        statuses: dict[Channel, StatusIndicator] = {}
        buttons: dict[Channel, Buttons] = {}
        closers: list[Callable[[], Awaitable[None]]] = []
        clients: dict[Channel, object] = {}
        for channel, adapter in CHANNELS.items():
            made = adapter.clients(adapter.settings(settings), (transports or {}).get(channel))
            if made is None:
                continue
            replies[channel], statuses[channel], clients[channel] = made.replies, made.status, made.client
            if made.buttons is not None:
                buttons[channel] = made.buttons
            closers.append(made.aclose)
        github, linear = clients.get(Channel.GITHUB), clients.get(Channel.LINEAR)
        return cls(
            replies,
            statuses,
            closers,
            github=github if isinstance(github, GithubClient) else None,
            linear=linear if isinstance(linear, LinearClient) else None,
            buttons=buttons,
        )

    def configured(self, channel: Channel) -> bool:
        return channel in self._replies

    def _replies_for(self, channel: Channel) -> Replies:
        found = self._replies.get(channel)
        if found is None:
            raise ChannelNotConfigured(f"no credentials to answer on {channel.value}")
        return found

    async def reply(
        self, address: ReplyAddress, text: str, *, effect: str | None = None, approve_button: bool = False
    ) -> None:
        """Post ``text`` to the conversation at ``address``, marked with ``effect`` where the channel
        allows; ``approve_button`` adds the owner's Approve button where the channel has buttons (Slack)."""
        replies = self._replies_for(address.channel)
        buttons = self._buttons.get(address.channel) if approve_button else None
        if buttons is not None:
            await buttons.reply_with_button(address, text, APPROVE_BUTTON, effect=effect)
        else:
            await replies.reply(address, text, effect=effect)

    async def reply_with_continue(self, address: ReplyAddress, text: str) -> None:
        """Post ``text`` with the Continue button of a thread paused at a budget where the channel
        has buttons (Slack); elsewhere the text alone (it says how to continue)."""
        buttons = self._buttons.get(address.channel)
        if buttons is not None:
            await buttons.reply_with_button(address, text, CONTINUE_BUTTON)
            return
        await self.reply(address, text)

    async def reply_once(
        self, effects: Effects, address: ReplyAddress, text: str, *, approve_button: bool = False
    ) -> None:
        """Post ``text`` at ``address`` once for the current tool call, however often it is replayed."""
        replies = self._replies_for(address.channel)

        async def post(effect: str) -> dict[str, object]:
            await self.reply(address, text, effect=effect, approve_button=approve_button)
            return {"channel": address.channel.value}

        async def find(effect: str) -> dict[str, object] | None:
            return {"channel": address.channel.value} if await replies.find_reply(address, effect) else None

        await effects.once(f"reply-{address.channel.value}", post, find=find)

    async def acknowledge(self, message: InboxMessage) -> bool:
        """Show that the agent picked ``message`` up (👀 or a Linear thought); False when the
        source has nothing to acknowledge on."""
        return await self._replies_for(message.reply_to.channel).acknowledge(message)

    async def show_status(self, address: ReplyAddress, status: RunStatus, detail: str = "") -> dict[str, str]:
        """Update the run's status indicator; returns address fields to keep for the next update."""
        indicator = self._statuses.get(address.channel)
        if indicator is None:
            raise ChannelNotConfigured(f"no credentials to show a status on {address.channel.value}")
        return await indicator.show(address, status, detail)

    async def aclose(self) -> None:
        for close in self._closers:
            await close()
