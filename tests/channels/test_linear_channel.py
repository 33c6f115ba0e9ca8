"""The channel contract for Linear, against the fake Linear GraphQL API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from drydock.accounts import Provider
from drydock.bus.envelopes import InboxMessage, ReplyAddress
from drydock.channels.linear.adapter import ADAPTER
from drydock.channels.linear.reply import PICKUP
from tests.channels.channel_contract import Mention, TimestampedChannelContract
from tests.fakes import linear as fake_linear
from tests.fakes import signing
from tests.ingress.conftest import LINEAR_SECRET, ORG, RunningIngress, link, trust

HUMAN = "user-human-1"


class TestLinearChannel(TimestampedChannelContract):
    adapter = ADAPTER
    signature_header = "Linear-Signature"

    @pytest.fixture
    async def double(self) -> AsyncIterator[fake_linear.FakeLinear]:
        async with fake_linear.FakeLinear("lin_api_test") as fake:
            yield fake

    def sections(self, double: fake_linear.FakeLinear) -> dict[str, dict[str, Any]]:
        return {"linear": {"webhook_secret": LINEAR_SECRET, "api_key": double.state.api_key, "api_url": double.api_url}}

    def secret(self, double: fake_linear.FakeLinear) -> str:
        return LINEAR_SECRET

    async def arrange(self, running: RunningIngress, repo: str) -> None:
        await trust(running, repo)
        await link(running, Provider.LINEAR, HUMAN)

    def _payload(self, double: fake_linear.FakeLinear, repo: str) -> tuple[dict[str, Any], str, str]:
        words = "take this one"
        issue = double.state.add_issue("Fix the login page")
        body = f"@drydock {words} repo:{ORG}/{repo}"
        comment = double.state.add_comment(issue.id, body, user_id=HUMAN)
        payload = fake_linear.comment_created(issue, body, user_id=HUMAN, comment_id=comment.id)
        return payload, f"linear:{fake_linear.ORGANIZATION}:issue:{issue.id}", words

    def mention(self, double: fake_linear.FakeLinear, secret: str, repo: str) -> Mention:
        payload, key, words = self._payload(double, repo)
        return Mention(signing.linear(secret, payload), key, words)

    def stale(self, double: fake_linear.FakeLinear, secret: str, repo: str) -> signing.SignedRequest:
        payload, _, _ = self._payload(double, repo)
        return signing.linear(secret, payload, timestamp_ms=fake_linear.now_ms() - 61_000)

    def replies(self, double: fake_linear.FakeLinear, address: ReplyAddress) -> list[str]:
        return [comment.body for comment in double.state.comments_on(address.address["issue_id"])]

    def acknowledged(self, double: fake_linear.FakeLinear, message: InboxMessage) -> bool:
        return PICKUP in self.replies(double, message.reply_to)
