"""The behaviour every channel must have, written once.

A channel's test module subclasses :class:`ChannelContract`, sets ``adapter`` (the adapter its
package exports) and ``signature_header``, and defines the ``double`` fixture (its fake API,
under ``tests/fakes/``) and the hooks below, which say how the channel's deliveries look and
where its replies land in the double. The deliveries go through the real ingress app on the
session's NATS and Valkey; the replies through :class:`Outbound`, built from the channel map.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import httpx
import pytest
from structlog.testing import capture_logs

from drydock.bus.envelopes import InboxMessage, ReplyAddress
from drydock.channels.adapter import AnyAdapter
from drydock.channels.errors import ChannelNotConfigured
from drydock.channels.intents import Delivery, Message
from drydock.channels.outbound import Outbound
from drydock.channels.registry import CHANNELS, thread_id
from drydock.config import Settings
from drydock.threads import ids
from tests.fakes.signing import SignedRequest
from tests.ingress.conftest import RunningIngress, StartIngress, ingress_settings


@dataclass(frozen=True)
class Mention:
    """A correctly signed delivery in which a person asks the agent for something."""

    request: SignedRequest
    key: str
    """The conversation's canonical thread key, spelled out as the channel's key format freezes it."""
    words: str
    """What the person wrote, as the message text must carry it."""


class ChannelContract:
    """Tests every channel passes. Not collected itself (no ``Test`` prefix)."""

    adapter: ClassVar[AnyAdapter]
    signature_header: ClassVar[str]

    @pytest.fixture
    def double(self) -> Any:
        """The running double of the channel's API (an async fixture yielding it, in the subclass)."""
        raise NotImplementedError("a channel's test case defines its double")

    def sections(self, double: Any) -> dict[str, dict[str, Any]]:
        """Settings sections (by name) with the webhook secret and the client credentials for ``double``."""
        raise NotImplementedError

    async def arrange(self, running: RunningIngress, repo: str) -> None:
        """Whatever makes a mention from this channel start a thread on ``acme/{repo}`` (trust, links)."""
        raise NotImplementedError

    def mention(self, double: Any, secret: str, repo: str) -> Mention:
        """A mention of the agent in a new conversation that exists in ``double``, signed with ``secret``."""
        raise NotImplementedError

    def secret(self, double: Any) -> str:
        """The webhook secret of :meth:`sections`."""
        raise NotImplementedError

    def replies(self, double: Any, address: ReplyAddress) -> list[str]:
        """The texts the agent posted in the conversation at ``address``, as ``double`` holds them."""
        raise NotImplementedError

    def acknowledged(self, double: Any, message: InboxMessage) -> bool:
        """Whether ``double`` shows the pickup of ``message`` (a reaction, a thought, a comment)."""
        raise NotImplementedError

    def _read(self, settings: Settings, mention: Mention) -> Delivery:
        """What the endpoint of the mention's path reads from it (headers as a server hands them over)."""
        (webhook,) = [webhook for webhook in self.adapter.webhooks if webhook.path == mention.request.path]
        return self.adapter.reader(webhook)(settings, httpx.Headers(mention.request.headers), mention.request.body)

    def _settings(self, settings: Settings, double: Any) -> Settings:
        return ingress_settings(settings, **self.sections(double))

    async def _received(self, start_ingress: StartIngress, double: Any, repo: str) -> tuple[Mention, InboxMessage]:
        """A mention through the real ingress, and the inbox message it became."""
        async with start_ingress(**self.sections(double)) as running:
            await self.arrange(running, repo)
            mention = self.mention(double, self.secret(double), repo)
            response = await running.send(mention.request)
            assert response.status_code == 200, response.text
            assert response.json()["status"] == "accepted"
            (message,) = await running.inbox(ids.thread_id(mention.key))
        return mention, message

    def test_the_adapter_is_in_the_channel_map(self) -> None:
        assert CHANNELS[self.adapter.channel] is self.adapter

    async def test_every_webhook_path_is_served_and_verifies_first(
        self, start_ingress: StartIngress, double: Any
    ) -> None:
        async with start_ingress(**self.sections(double)) as running:
            for webhook in self.adapter.webhooks:
                answer = await running.client.post(webhook.path, content=b"{}")
                assert answer.status_code == 401, (webhook.path, answer.text)
                assert "missing" in answer.json()["error"]

    def test_a_mention_parses_to_a_message_in_a_conversation_of_the_channel(
        self, settings: Settings, double: Any, repo: str
    ) -> None:
        mention = self.mention(double, self.secret(double), repo)
        delivery = self._read(self._settings(settings, double), mention)
        assert delivery.channel is self.adapter.channel
        (intent,) = delivery.intents
        assert isinstance(intent, Message)
        assert isinstance(intent.conversation, self.adapter.conversation)
        assert intent.conversation.source is self.adapter.channel
        assert intent.sender.channel is intent.reply_to.channel is self.adapter.channel
        assert mention.words in intent.text

    def test_the_conversation_maps_to_its_frozen_thread_key(self, settings: Settings, double: Any, repo: str) -> None:
        configured = self._settings(settings, double)
        mention = self.mention(double, self.secret(double), repo)
        first = self._read(configured, mention).intents[0]
        again = self._read(configured, mention).intents[0]
        assert isinstance(first, Message)
        assert isinstance(again, Message)
        assert self.adapter.thread_key(first.conversation) == self.adapter.thread_key(again.conversation) == mention.key
        assert thread_id(first.conversation) == ids.thread_id(mention.key)
        other = self.mention(double, self.secret(double), repo)
        assert other.key != mention.key, "a new conversation has a thread of its own"

    async def test_a_signed_mention_reaches_the_inbox_of_its_thread(
        self, start_ingress: StartIngress, double: Any, repo: str
    ) -> None:
        mention, message = await self._received(start_ingress, double, repo)
        assert message.delivery_id == mention.request.delivery_id
        assert message.thread_id == ids.thread_id(mention.key)
        assert message.channel is message.reply_to.channel is self.adapter.channel
        assert mention.words in message.text

    async def _refused(self, running: RunningIngress, request: SignedRequest, reason_part: str) -> None:
        before = await running.stream_marks()
        with capture_logs() as logs:
            response = await running.send(request)
        assert response.status_code == 401
        assert reason_part in response.json()["error"]
        assert await running.stream_marks() == before
        (rejected,) = [entry for entry in logs if entry["event"] == "webhook rejected"]
        assert reason_part in rejected["reason"]
        assert (rejected["status"], rejected["channel"]) == (401, self.adapter.channel.value)

    async def test_a_wrong_secret_is_refused(self, start_ingress: StartIngress, double: Any, repo: str) -> None:
        async with start_ingress(**self.sections(double)) as running:
            await self.arrange(running, repo)
            await self._refused(running, self.mention(double, "not-the-secret", repo).request, "does not match")

    async def test_a_tampered_body_is_refused(self, start_ingress: StartIngress, double: Any, repo: str) -> None:
        async with start_ingress(**self.sections(double)) as running:
            await self.arrange(running, repo)
            mention = self.mention(double, self.secret(double), repo)
            body = mention.request.body
            tampered = mention.request.with_body(body.replace(mention.words.encode(), b"drop the database", 1))
            assert tampered.body != body
            await self._refused(running, tampered, "does not match")

    async def test_a_missing_signature_is_refused(self, start_ingress: StartIngress, double: Any, repo: str) -> None:
        async with start_ingress(**self.sections(double)) as running:
            await self.arrange(running, repo)
            request = self.mention(double, self.secret(double), repo).request
            await self._refused(
                running, request.with_headers(**{self.signature_header.replace("-", "_"): None}), "missing"
            )

    async def test_a_redelivery_is_published_once(self, start_ingress: StartIngress, double: Any, repo: str) -> None:
        async with start_ingress(**self.sections(double)) as running:
            await self.arrange(running, repo)
            mention = self.mention(double, self.secret(double), repo)
            first = await running.send(mention.request)
            marks = await running.stream_marks()
            second = await running.send(mention.request)
            assert first.status_code == second.status_code == 200
            assert second.json()["status"] == "duplicate"
            assert await running.stream_marks() == marks
            assert len(await running.inbox(ids.thread_id(mention.key))) == 1

    def test_without_its_secret_the_channel_is_not_configured(self, settings: Settings, double: Any, repo: str) -> None:
        with pytest.raises(ChannelNotConfigured, match="DRYDOCK_"):
            self._read(settings, self.mention(double, self.secret(double), repo))

    async def test_the_reply_to_a_mention_reaches_its_conversation(
        self, start_ingress: StartIngress, settings: Settings, double: Any, repo: str
    ) -> None:
        _, message = await self._received(start_ingress, double, repo)
        outbound = Outbound.from_settings(self._settings(settings, double))
        try:
            assert outbound.configured(self.adapter.channel)
            await outbound.reply(message.reply_to, "Fixed in the pull request.")
            assert "Fixed in the pull request." in self.replies(double, message.reply_to)
        finally:
            await outbound.aclose()

    async def test_the_pickup_of_a_mention_is_acknowledged(
        self, start_ingress: StartIngress, settings: Settings, double: Any, repo: str
    ) -> None:
        _, message = await self._received(start_ingress, double, repo)
        outbound = Outbound.from_settings(self._settings(settings, double))
        try:
            assert not self.acknowledged(double, message)
            assert await outbound.acknowledge(message)
            assert self.acknowledged(double, message)
        finally:
            await outbound.aclose()

    async def test_without_credentials_nothing_answers_on_the_channel(
        self, settings: Settings, double: Any, repo: str
    ) -> None:
        assert self.adapter.clients(self.adapter.settings(settings), None) is None
        outbound = Outbound.from_settings(settings)
        address = ReplyAddress(channel=self.adapter.channel, address={})
        assert not outbound.configured(self.adapter.channel)
        with pytest.raises(ChannelNotConfigured):
            await outbound.reply(address, "nobody hears this")


class TimestampedChannelContract(ChannelContract):
    """A channel whose signature covers the time it was sent (Slack, Linear; GitHub signs no time,
    and its redeliveries are caught by their delivery id instead)."""

    def stale(self, double: Any, secret: str, repo: str) -> SignedRequest:
        """A delivery signed correctly but outside the replay window."""
        raise NotImplementedError

    async def test_a_delivery_outside_the_replay_window_is_refused(
        self, start_ingress: StartIngress, double: Any, repo: str
    ) -> None:
        async with start_ingress(**self.sections(double)) as running:
            await self.arrange(running, repo)
            await self._refused(running, self.stale(double, self.secret(double), repo), "replay window")
