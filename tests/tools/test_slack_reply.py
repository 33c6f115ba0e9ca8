"""``slack_reply`` against the fake Slack: a reply lands in the thread's Slack thread; a thread
from elsewhere gets an answer saying so."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.bus.envelopes import Channel, EventType, ReplyAddress
from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.effects import EffectLedger, bound_call
from drydock.infra.redis import Keys
from drydock.tools import slack_reply
from tests.fakes.slack import BOT_USER, TEAM, FakeSlack
from tests.tools.channel_fixtures import configured, last_event
from tests.tools.conftest import MakeContext, github_reply_to

CHANNEL = "C0WIDGETS"


@pytest.fixture(scope="module")
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
async def outbound(settings: Settings, slack: FakeSlack) -> AsyncIterator[Outbound]:
    clients = Outbound.from_settings(
        configured(settings, slack={"bot_token": slack.state.token, "api_url": slack.api_url})
    )
    yield clients
    await clients.aclose()


def slack_thread(slack: FakeSlack) -> ReplyAddress:
    root = slack.state.add_message(CHANNEL, "<@U0DRYBOT> please fix the widget")
    return ReplyAddress(channel=Channel.SLACK, address={"team": TEAM, "channel": CHANNEL, "thread_ts": root})


class TestReply:
    async def test_posts_in_the_thread_s_slack_thread(
        self, slack: FakeSlack, outbound: Outbound, make_context: MakeContext, bus: Bus, thread_id: str
    ) -> None:
        address = slack_thread(slack)
        tool = slack_reply.build(make_context(reply_to=address, outbound=outbound))

        answer = await tool.ainvoke({"text": "Opened a pull request: <https://github.com/acme/widgets/pull/8|#8>"})

        [reply] = slack.state.replies_in(CHANNEL, address.address["thread_ts"])
        assert (reply.text, reply.user) == (
            "Opened a pull request: <https://github.com/acme/widgets/pull/8|#8>",
            BOT_USER,
        )
        assert answer == "Posted in the Slack thread."
        event = await last_event(bus, thread_id, EventType.MESSAGE_POSTED)
        assert event is not None
        assert event.data == {"channel": "slack", "target": f"{CHANNEL}/{address.address['thread_ts']}", "url": None}

    async def test_a_thread_from_elsewhere_is_told_so(
        self, slack: FakeSlack, outbound: Outbound, make_context: MakeContext, bus: Bus, thread_id: str
    ) -> None:
        posted_before = len(slack.state.messages)
        tool = slack_reply.build(make_context(reply_to=github_reply_to(), outbound=outbound))

        answer = await tool.ainvoke({"text": "hello"})

        assert answer.startswith("Not posted: this thread came from github, not from Slack.")
        assert len(slack.state.messages) == posted_before
        assert await last_event(bus, thread_id, EventType.MESSAGE_POSTED) is None

    async def test_without_slack_credentials_it_says_so(self, slack: FakeSlack, make_context: MakeContext) -> None:
        tool = slack_reply.build(make_context(reply_to=slack_thread(slack)))

        answer = await tool.ainvoke({"text": "hello"})

        assert answer == "Slack is not configured for this Drydock installation; nothing was posted."


class TestReplay:
    """A replayed ``slack_reply`` call leaves one message in the Slack thread, wherever the crash fell."""

    CALL = "step-12.0"
    EFFECT = f"{CALL}:reply-slack"

    async def test_a_crash_before_the_post_posts_once_on_replay(
        self, slack: FakeSlack, outbound: Outbound, make_context: MakeContext, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        address = slack_thread(slack)
        await EffectLedger(redis, keys).claim(thread_id, self.EFFECT)
        tool = slack_reply.build(make_context(reply_to=address, outbound=outbound))

        with bound_call(self.CALL):
            await tool.ainvoke({"text": "Done."})

        assert [m.text for m in slack.state.replies_in(CHANNEL, address.address["thread_ts"])] == ["Done."]

    async def test_a_crash_after_the_post_finds_the_message_by_its_metadata(
        self, slack: FakeSlack, outbound: Outbound, make_context: MakeContext, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        address = slack_thread(slack)
        thread_ts = address.address["thread_ts"]
        for n in range(3):
            slack.state.add_message(CHANNEL, f"chatter {n}", thread_ts=thread_ts)
        await EffectLedger(redis, keys).claim(thread_id, self.EFFECT)
        await outbound.reply(address, "Done.", effect=self.EFFECT)
        tool = slack_reply.build(make_context(reply_to=address, outbound=outbound))

        with bound_call(self.CALL):
            await tool.ainvoke({"text": "Done."})

        ours = [m for m in slack.state.replies_in(CHANNEL, thread_ts) if m.user == BOT_USER]
        assert [m.text for m in ours] == ["Done."]

    async def test_a_crash_after_the_ledger_record_does_not_post_again(
        self, slack: FakeSlack, outbound: Outbound, make_context: MakeContext
    ) -> None:
        address = slack_thread(slack)
        tool = slack_reply.build(make_context(reply_to=address, outbound=outbound))

        for _ in range(2):
            with bound_call(self.CALL):
                await tool.ainvoke({"text": "Done."})

        assert len(slack.state.replies_in(CHANNEL, address.address["thread_ts"])) == 1
