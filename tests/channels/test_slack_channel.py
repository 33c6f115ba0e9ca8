"""The channel contract for Slack, against the fake Slack Web API."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from drydock.accounts import Provider
from drydock.bus.envelopes import InboxMessage, ReplyAddress
from drydock.channels.slack.adapter import ADAPTER
from tests.channels.channel_contract import Mention, TimestampedChannelContract
from tests.fakes import signing
from tests.fakes import slack as fake_slack
from tests.ingress.conftest import ORG, SLACK_SECRET, RunningIngress, link, trust

CHANNEL = "C0GENERAL"


class TestSlackChannel(TimestampedChannelContract):
    adapter = ADAPTER
    signature_header = "X-Slack-Signature"

    @pytest.fixture
    async def double(self) -> AsyncIterator[fake_slack.FakeSlack]:
        async with fake_slack.FakeSlack("xoxb-test") as fake:
            yield fake

    def sections(self, double: fake_slack.FakeSlack) -> dict[str, dict[str, Any]]:
        return {"slack": {"signing_secret": SLACK_SECRET, "bot_token": double.state.token, "api_url": double.api_url}}

    def secret(self, double: fake_slack.FakeSlack) -> str:
        return SLACK_SECRET

    async def arrange(self, running: RunningIngress, repo: str) -> None:
        await trust(running, repo)
        await link(running, Provider.SLACK, "U0HUMAN")

    def _payload(self, double: fake_slack.FakeSlack, repo: str) -> tuple[dict[str, Any], str, str]:
        words = "please fix the flaky test"
        text = f"<@{fake_slack.BOT_USER}> {words} repo:{ORG}/{repo}"
        ts = double.state.add_message(CHANNEL, text)
        return fake_slack.app_mention(CHANNEL, ts, text), ts, words

    def mention(self, double: fake_slack.FakeSlack, secret: str, repo: str) -> Mention:
        payload, ts, words = self._payload(double, repo)
        return Mention(signing.slack_event(secret, payload), f"slack:{fake_slack.TEAM}:{CHANNEL}:{ts}", words)

    def stale(self, double: fake_slack.FakeSlack, secret: str, repo: str) -> signing.SignedRequest:
        payload, _, _ = self._payload(double, repo)
        return signing.slack_event(secret, payload, timestamp=int(time.time()) - 301)

    def replies(self, double: fake_slack.FakeSlack, address: ReplyAddress) -> list[str]:
        return [
            posted.text for posted in double.state.replies_in(address.address["channel"], address.address["thread_ts"])
        ]

    def acknowledged(self, double: fake_slack.FakeSlack, message: InboxMessage) -> bool:
        where = (message.references["slack_channel"], message.references["slack_ts"])
        return ("eyes", fake_slack.BOT_USER) in double.state.reactions.get(where, [])
