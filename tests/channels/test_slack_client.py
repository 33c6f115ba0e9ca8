"""The Slack client (slack_sdk's AsyncWebClient) against the fake Slack Web API over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from drydock.bus.envelopes import Author, Channel, InboxMessage, ReplyAddress
from drydock.channels.errors import ChannelNotConfigured, OutboundFailed
from drydock.channels.run_status import RunStatus
from drydock.channels.slack.client import SlackClient
from drydock.channels.slack.reply import SlackReplies
from drydock.channels.slack.status import SlackStatus
from drydock.config import SlackSettings
from tests.fakes.slack import FakeSlack

CHANNEL = "C0GENERAL"


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack("xoxb-test") as fake:
        yield fake


@pytest.fixture
async def client(slack: FakeSlack) -> AsyncIterator[SlackClient]:
    client = SlackClient(SlackSettings.model_validate({"bot_token": "xoxb-test", "api_url": slack.api_url}))
    yield client
    await client.aclose()


def address(thread_ts: str) -> ReplyAddress:
    return ReplyAddress(channel=Channel.SLACK, address={"team": "T1", "channel": CHANNEL, "thread_ts": thread_ts})


class TestSlackClient:
    async def test_reply_in_thread_and_acknowledge(self, slack: FakeSlack, client: SlackClient) -> None:
        root = slack.state.add_message(CHANNEL, "<@U0DRYBOT> help")
        replies = SlackReplies(client)
        await replies.reply(address(root), "Looking into it.")
        (posted,) = slack.state.replies_in(CHANNEL, root)
        assert posted.text == "Looking into it."
        message = InboxMessage(
            delivery_id="Ev1",
            thread_id="00000000-0000-0000-0000-000000000002",
            channel=Channel.SLACK,
            author=Author(channel=Channel.SLACK, external_id="U0HUMAN", name="U0HUMAN"),
            text="help",
            references={"slack_channel": CHANNEL, "slack_ts": root},
            reply_to=address(root),
        )
        assert await replies.acknowledge(message)
        assert await replies.acknowledge(message), "a second 👀 is already there and counts as done"
        assert slack.state.reactions[(CHANNEL, root)] == [("eyes", "U0DRYBOT")]

    async def test_assistant_status_is_set_and_cleared(self, slack: FakeSlack, client: SlackClient) -> None:
        root = slack.state.add_message(CHANNEL, "hi")
        status = SlackStatus(client)
        await status.show(address(root), RunStatus.WORKING)
        assert slack.state.statuses[(CHANNEL, root)] == "is working…"
        await status.show(address(root), RunStatus.FINISHED)
        assert slack.state.statuses[(CHANNEL, root)] == ""

    async def test_slack_errors_become_outbound_failures(self, slack: FakeSlack) -> None:
        wrong = SlackClient(SlackSettings.model_validate({"bot_token": "xoxb-wrong", "api_url": slack.api_url}))
        try:
            with pytest.raises(OutboundFailed, match="invalid_auth"):
                await wrong.post_in_thread(CHANNEL, "1.0", "x")
        finally:
            await wrong.aclose()

    async def test_unknown_channels_and_rate_limits(self, slack: FakeSlack, client: SlackClient) -> None:
        with pytest.raises(OutboundFailed, match="channel_not_found"):
            await client.post_in_thread("C0NOWHERE", "1.0", "x")
        slack.state.rate_limited.add("chat.postMessage")
        slack.state.channels.add(CHANNEL)
        with pytest.raises(OutboundFailed) as limited:
            await client.post_in_thread(CHANNEL, "1.0", "x")
        assert limited.value.status == 429

    async def test_without_a_token_the_client_is_refused(self) -> None:
        with pytest.raises(ChannelNotConfigured):
            SlackClient(SlackSettings())
