"""Slack requests through the real endpoints: mentions, direct messages, follow-ups in threads,
interactivity, the URL verification handshake and Slack's retries."""

from __future__ import annotations

import itertools
import time

from drydock.accounts import Provider, RepositorySettings, UserProfile
from drydock.bus import Trigger
from drydock.roles import Role
from drydock.threads import ids
from tests.fakes import signing
from tests.fakes import slack as fake_slack
from tests.ingress.conftest import ORG, SLACK_SECRET, RunningIngress, StartIngress, link, trust

CHANNEL = "C0GENERAL"
_ts = itertools.count(1)


def ts() -> str:
    return f"{int(time.time())}.{next(_ts):06d}"


def mention(text: str, *, at: str, thread_ts: str | None = None, user: str = "U0HUMAN") -> signing.SignedRequest:
    payload = fake_slack.app_mention(CHANNEL, at, f"<@{fake_slack.BOT_USER}> {text}", thread_ts=thread_ts, user=user)
    return signing.slack_event(SLACK_SECRET, payload)


def thread_of(thread_ts: str, channel: str = CHANNEL) -> str:
    return ids.slack_thread(fake_slack.TEAM, channel, thread_ts)


async def arrange(running: RunningIngress, repo: str) -> None:
    await trust(running, repo)
    await link(running, Provider.SLACK, "U0HUMAN", "user-ada")


class TestMentions:
    async def test_a_mention_starts_a_thread_at_its_own_ts(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await arrange(running, repo)
            at = ts()
            response = await running.send(mention(f"fix the build repo:{ORG}/{repo}", at=at))
            assert response.status_code == 200, response.text
            (message,) = await running.inbox(thread_of(at))
            assert message.trigger is Trigger.DIRECT
            assert message.repository == f"{ORG}/{repo}"
            assert message.author.user_id == "user-ada"
            assert message.reply_to.address == {"team": fake_slack.TEAM, "channel": CHANNEL, "thread_ts": at}
            assert await running.wakes(Role.CODER, thread_of(at)) == 1

    async def test_a_mention_inside_a_thread_joins_that_thread(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await arrange(running, repo)
            root = ts()
            await running.send(mention(f"look at this repo:{ORG}/{repo}", at=ts(), thread_ts=root))
            assert len(await running.inbox(thread_of(root))) == 1

    async def test_the_users_default_repository_then_the_teams(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await trust(running, repo, default=True)
            await link(running, Provider.SLACK, "U0HUMAN", "user-ada")
            first = ts()
            await running.send(mention("fix it", at=first))
            assert (await running.inbox(thread_of(first)))[0].repository == f"{ORG}/{repo}"
            other = f"{repo}-2"
            await running.accounts.save_repository(RepositorySettings(full_name=f"{ORG}/{other}"))
            await running.accounts.save_profile(UserProfile(user_id="user-ada", default_repository=f"{ORG}/{other}"))
            second = ts()
            await running.send(mention("fix it", at=second))
            assert (await running.inbox(thread_of(second)))[0].repository == f"{ORG}/{other}"

    async def test_an_unlinked_slack_user_is_ignored(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await trust(running, repo)
            at = ts()
            before = await running.stream_marks()
            response = await running.send(mention(f"do it repo:{ORG}/{repo}", at=at, user="U0STRANGER"))
            assert "not linked" in str(response.json()["skipped"])
            assert await running.stream_marks() == before

    async def test_a_direct_message_starts_a_thread(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await arrange(running, repo)
            at = ts()
            payload = fake_slack.message("D0DIRECT", at, f"please help repo:{ORG}/{repo}", channel_type="im")
            await running.send(signing.slack_event(SLACK_SECRET, payload))
            (message,) = await running.inbox(thread_of(at, "D0DIRECT"))
            assert message.trigger is Trigger.DIRECT


class TestFollowUps:
    async def test_a_reply_in_the_agents_thread_continues_it(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await arrange(running, repo)
            root = ts()
            await running.send(mention(f"start repo:{ORG}/{repo}", at=root))
            reply = fake_slack.message(CHANNEL, ts(), "and also the docs", thread_ts=root)
            await running.send(signing.slack_event(SLACK_SECRET, reply))
            first, second = await running.inbox(thread_of(root))
            assert first.trigger is Trigger.DIRECT
            assert second.trigger is Trigger.FOLLOW_UP
            assert second.text == "and also the docs"

    async def test_replies_elsewhere_and_channel_chatter_are_ignored(
        self, start_ingress: StartIngress, repo: str
    ) -> None:
        async with start_ingress() as running:
            await arrange(running, repo)
            before = await running.stream_marks()
            for payload in (
                fake_slack.message(CHANNEL, ts(), "unrelated thread reply", thread_ts=ts()),
                fake_slack.message(CHANNEL, ts(), "top-level chatter"),
                fake_slack.message(CHANNEL, ts(), f"<@{fake_slack.BOT_USER}> dup of the app_mention"),
                fake_slack.message(CHANNEL, ts(), "a bot", user=None, bot_id="B0OTHER", subtype="bot_message"),
                fake_slack.message(CHANNEL, ts(), "edited", subtype="message_changed"),
            ):
                response = await running.send(signing.slack_event(SLACK_SECRET, payload))
                assert response.status_code == 200
            assert await running.stream_marks() == before


class TestInteractivity:
    async def test_a_button_press_in_the_agents_thread_continues_it(
        self, start_ingress: StartIngress, repo: str
    ) -> None:
        async with start_ingress() as running:
            await arrange(running, repo)
            root = ts()
            await running.send(mention(f"start repo:{ORG}/{repo}", at=root))
            press = fake_slack.block_actions(CHANNEL, ts(), "approve_plan", "yes", thread_ts=root)
            response = await running.send(signing.slack_interaction(SLACK_SECRET, press))
            assert response.status_code == 200
            _, pressed = await running.inbox(thread_of(root))
            assert pressed.text == "[pressed approve_plan] yes"

    async def test_a_button_press_outside_a_thread_is_ignored(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await arrange(running, repo)
            before = await running.stream_marks()
            press = fake_slack.block_actions(CHANNEL, ts(), "approve_plan", "yes")
            await running.send(signing.slack_interaction(SLACK_SECRET, press))
            assert await running.stream_marks() == before

    async def test_the_message_shortcut_starts_a_thread(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await arrange(running, repo)
            at = ts()
            action = fake_slack.message_action(CHANNEL, at, f"this is broken repo:{ORG}/{repo}")
            await running.send(signing.slack_interaction(SLACK_SECRET, action))
            (message,) = await running.inbox(thread_of(at))
            assert message.text.startswith("this is broken")


class TestProtocol:
    async def test_url_verification_is_answered_only_when_signed(self, start_ingress: StartIngress) -> None:
        async with start_ingress() as running:
            signed = signing.slack_event(SLACK_SECRET, fake_slack.url_verification("3eZbrw1aBm2rZgRNFdxV2595E9CY"))
            response = await running.send(signed)
            assert response.status_code == 200
            assert response.json() == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY"}
            forged = signing.slack_event("wrong", fake_slack.url_verification("x"))
            assert (await running.send(forged)).status_code == 401

    async def test_slack_retries_of_an_event_are_published_once(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await arrange(running, repo)
            at = ts()
            payload = fake_slack.app_mention(CHANNEL, at, f"<@{fake_slack.BOT_USER}> go repo:{ORG}/{repo}")
            assert (await running.send(signing.slack_event(SLACK_SECRET, payload))).status_code == 200
            retry = signing.slack_event(SLACK_SECRET, payload, retry=1)
            response = await running.send(retry)
            assert response.json()["status"] == "duplicate"
            assert len(await running.inbox(thread_of(at))) == 1
