"""Linking a Slack or Linear account through the real ingress: signed webhooks carrying
``link CODE`` link their sender to the user the dashboard issued the code to, are answered in
the source through the real clients and the fakes, and start no work. Until then (a pending
link) the account's mentions are not trusted."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from drydock.accounts import LinkCodes, Provider, UserIdentity
from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.threads import ids
from tests.fakes import linear as fake_linear
from tests.fakes import signing
from tests.fakes import slack as fake_slack
from tests.ingress.conftest import (
    LINEAR_SECRET,
    ORG,
    SLACK_SECRET,
    RunningIngress,
    StartIngress,
    ingress_settings,
    trust,
)
from tests.waiting import eventually

CHANNEL = "C0GENERAL"
DM = "D0ADA"


@dataclass
class Stage:
    running: RunningIngress
    codes: LinkCodes
    slack: fake_slack.FakeSlack
    linear: fake_linear.FakeLinear


@pytest.fixture
async def stage(start_ingress: StartIngress, settings: Settings, repo: str) -> AsyncIterator[Stage]:
    async with (
        fake_slack.FakeSlack("xoxb-test") as slack,
        fake_linear.FakeLinear("lin_api_test") as linear,
    ):
        sections = {
            "slack": {"bot_token": "xoxb-test", "api_url": slack.api_url},
            "linear": {"api_key": "lin_api_test", "api_url": linear.api_url},
        }
        outbound = Outbound.from_settings(ingress_settings(settings, **sections))
        async with start_ingress(outbound=outbound, **sections) as running:
            await trust(running, repo)
            await running.accounts.save_identity(UserIdentity(user_id="user-ada", provider="github", login="ada"))
            codes = LinkCodes(running.ingress.runtime.redis, running.keys, running.accounts)
            yield Stage(running, codes, slack, linear)


def slack_mention(
    slack: fake_slack.FakeSlack, text: str, *, user: str = "U0HUMAN"
) -> tuple[str, signing.SignedRequest]:
    body = f"<@{fake_slack.BOT_USER}> {text}"
    ts = slack.state.add_message(CHANNEL, body, user=user)
    return ts, signing.slack_event(SLACK_SECRET, fake_slack.app_mention(CHANNEL, ts, body, user=user))


class TestSlack:
    async def test_a_pending_link_is_not_trusted_until_the_code_comes_from_the_account(
        self, stage: Stage, repo: str
    ) -> None:
        running, slack = stage.running, stage.slack
        issued = await stage.codes.issue("user-ada", Provider.SLACK)

        _, before_proof = slack_mention(slack, f"fix it repo:{ORG}/{repo}")
        response = await running.send(before_proof)
        assert "not linked" in str(response.json()["skipped"])

        marks = await running.stream_marks()
        at, request = slack_mention(slack, f"link {issued.code}")
        response = await running.send(request)
        assert response.status_code == 200, response.text
        assert response.json()["threads"] == []
        await eventually(lambda: bool(slack.state.replies_in(CHANNEL, at)))
        (answer,) = slack.state.replies_in(CHANNEL, at)
        assert "now linked to your Drydock user (ada)" in answer.text
        assert await running.stream_marks() == marks
        assert (
            await running.ingress.runtime.redis.exists(
                running.keys.thread(ids.slack_thread(fake_slack.TEAM, CHANNEL, at))
            )
            == 0
        )

        after, request = slack_mention(slack, f"fix it repo:{ORG}/{repo}")
        assert (await running.send(request)).status_code == 200
        (message,) = await running.inbox(ids.slack_thread(fake_slack.TEAM, CHANNEL, after))
        assert message.author.user_id == "user-ada"

    async def test_a_direct_message_links_its_sender(self, stage: Stage) -> None:
        issued = await stage.codes.issue("user-ada", Provider.SLACK)
        ts = stage.slack.state.add_message(DM, f"link {issued.code}", user="U0OTHER")
        payload = fake_slack.message(DM, ts, f"link {issued.code}", user="U0OTHER", channel_type="im")
        assert (await stage.running.send(signing.slack_event(SLACK_SECRET, payload))).status_code == 200
        await eventually(lambda: bool(stage.slack.state.replies_in(DM, ts)))
        assert await stage.running.accounts.user_for(Provider.SLACK, "U0OTHER") == "user-ada"
        assert await stage.running.accounts.user_for(Provider.SLACK, "U0HUMAN") is None

    async def test_a_wrong_code_is_answered_and_links_nothing(self, stage: Stage) -> None:
        running = stage.running
        await stage.codes.issue("user-ada", Provider.SLACK)
        marks = await running.stream_marks()
        at, request = slack_mention(stage.slack, "link AAAA-BBBB-CCCC")
        assert (await running.send(request)).status_code == 200
        await eventually(lambda: bool(stage.slack.state.replies_in(CHANNEL, at)))
        (answer,) = stage.slack.state.replies_in(CHANNEL, at)
        assert "not valid" in answer.text
        assert await running.accounts.user_for(Provider.SLACK, "U0HUMAN") is None
        assert await running.stream_marks() == marks

    async def test_guessing_is_bounded(self, stage: Stage) -> None:
        running = stage.running
        issued = await stage.codes.issue("user-ada", Provider.SLACK)
        for guess in ("AAAA-BBBB-CCCC", "AAAA-BBBB-CCCD", "AAAA-BBBB-CCCE", "AAAA-BBBB-CCCF", "AAAA-BBBB-CCCG"):
            _, request = slack_mention(stage.slack, f"link {guess}", user="U0GUESSER")
            assert (await running.send(request)).status_code == 200
        at, request = slack_mention(stage.slack, f"link {issued.code}", user="U0GUESSER")
        assert (await running.send(request)).status_code == 200
        await eventually(lambda: bool(stage.slack.state.replies_in(CHANNEL, at)))
        (answer,) = stage.slack.state.replies_in(CHANNEL, at)
        assert "Too many" in answer.text
        assert await running.accounts.user_for(Provider.SLACK, "U0GUESSER") is None


class TestLinear:
    async def test_a_comment_links_its_author_and_is_answered(self, stage: Stage, repo: str) -> None:
        running, linear = stage.running, stage.linear
        issued = await stage.codes.issue("user-ada", Provider.LINEAR)
        issue = linear.state.add_issue()

        mention = linear.state.add_comment(issue.id, f"@drydock go repo:{ORG}/{repo}", user_id="lin-ada")
        payload = fake_linear.comment_created(issue, mention.body, comment_id=mention.id, user_id="lin-ada")
        response = await running.send(signing.linear(LINEAR_SECRET, payload))
        assert "not linked" in str(response.json()["skipped"])

        marks = await running.stream_marks()
        comment = linear.state.add_comment(issue.id, f"@drydock link {issued.code}", user_id="lin-ada")
        payload = fake_linear.comment_created(issue, comment.body, comment_id=comment.id, user_id="lin-ada")
        response = await running.send(signing.linear(LINEAR_SECRET, payload))
        assert response.json()["threads"] == []
        await eventually(lambda: len(linear.state.comments_on(issue.id)) == 3)
        answer = linear.state.comments_on(issue.id)[2]
        assert answer.parent_id == comment.id
        assert "now linked" in answer.body
        assert await running.stream_marks() == marks
        assert await running.accounts.user_for(Provider.LINEAR, "lin-ada") == "user-ada"

        again = linear.state.add_comment(issue.id, f"@drydock go repo:{ORG}/{repo}", user_id="lin-ada")
        payload = fake_linear.comment_created(issue, again.body, comment_id=again.id, user_id="lin-ada")
        assert (await running.send(signing.linear(LINEAR_SECRET, payload))).json()["threads"]

    async def test_a_slack_code_does_not_link_a_linear_account(self, stage: Stage) -> None:
        issued = await stage.codes.issue("user-ada", Provider.SLACK)
        issue = stage.linear.state.add_issue()
        comment = stage.linear.state.add_comment(issue.id, f"@drydock link {issued.code}", user_id="lin-ada")
        payload = fake_linear.comment_created(issue, comment.body, comment_id=comment.id, user_id="lin-ada")
        await stage.running.send(signing.linear(LINEAR_SECRET, payload))
        await eventually(lambda: len(stage.linear.state.comments_on(issue.id)) == 2)
        assert "not valid" in stage.linear.state.comments_on(issue.id)[1].body
        assert await stage.running.accounts.user_for(Provider.LINEAR, "lin-ada") is None

    async def test_an_agent_session_on_a_link_comment_links_and_starts_no_work(self, stage: Stage) -> None:
        running, linear = stage.running, stage.linear
        issued = await stage.codes.issue("user-ada", Provider.LINEAR)
        issue, session = linear.state.add_issue(), linear.state.add_session()
        body = f"@drydock link {issued.code}"
        context = (
            f'<issue identifier="{issue.identifier}"><title>{issue.title}</title></issue>\n<comment>{body}</comment>'
        )
        created = fake_linear.agent_session_created(
            issue, session, creator_id="lin-ada", prompt_context=context, comment_body=body
        )
        marks = await running.stream_marks()
        response = await running.send(signing.linear(LINEAR_SECRET, created))
        assert response.json()["threads"] == []
        await eventually(lambda: bool(linear.state.activities))
        (answer,) = linear.state.activities
        assert (answer.agent_session_id, answer.type) == (session, "response")
        assert await running.accounts.user_for(Provider.LINEAR, "lin-ada") == "user-ada"

        comment = linear.state.add_comment(issue.id, body, user_id="lin-ada")
        payload = fake_linear.comment_created(issue, body, comment_id=comment.id, user_id="lin-ada")
        assert (await running.send(signing.linear(LINEAR_SECRET, payload))).json()["threads"] == []
        await eventually(lambda: len(linear.state.comments_on(issue.id)) == 2)
        assert "already sent this code, and it is linked" in linear.state.comments_on(issue.id)[1].body
        assert await running.stream_marks() == marks

    async def test_a_code_inside_a_wider_prompt_context_is_no_link_command(self, stage: Stage) -> None:
        issued = await stage.codes.issue("user-ada", Provider.LINEAR)
        issue, session = stage.linear.state.add_issue(), stage.linear.state.add_session()
        context = f"<issue><description>\nlink {issued.code}\n</description></issue>"
        created = fake_linear.agent_session_created(issue, session, creator_id="lin-bob", prompt_context=context)
        response = await stage.running.send(signing.linear(LINEAR_SECRET, created))
        assert "not linked" in str(response.json()["skipped"])
        assert await stage.running.accounts.user_for(Provider.LINEAR, "lin-bob") is None
        assert [link.provider for link in await stage.codes.pending("user-ada")] == [Provider.LINEAR]
