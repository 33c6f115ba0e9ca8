"""``@drydock model=… effort=…`` in a GitHub, Slack or Linear message: checked against the model
catalog, kept as the thread's setting until changed, and refused with the valid choices."""

from __future__ import annotations

import itertools
import time
import uuid

from drydock.accounts import Provider
from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.roles import Role
from drydock.threads import ids
from tests.fakes import linear as fake_linear
from tests.fakes import signing
from tests.fakes import slack as fake_slack
from tests.fakes.github import FakeGithub, webhooks
from tests.fakes.github.activity import activity_of
from tests.ingress.conftest import (
    GITHUB_SECRET,
    HOST,
    LINEAR_SECRET,
    ORG,
    SLACK_SECRET,
    StartIngress,
    ingress_settings,
    link,
    trust,
)
from tests.waiting import eventually

CHANNEL = "C0GENERAL"
PERMISSIONS = {"issues": "write", "pull_requests": "write", "metadata": "read"}
_ts = itertools.count(1)


def ts() -> str:
    return f"{int(time.time())}.{next(_ts):06d}"


def slack_mention(text: str, *, at: str, thread_ts: str | None = None) -> signing.SignedRequest:
    payload = fake_slack.app_mention(CHANNEL, at, f"<@{fake_slack.BOT_USER}> {text}", thread_ts=thread_ts)
    return signing.slack_event(SLACK_SECRET, payload)


class TestSlack:
    async def test_the_choice_is_the_threads_setting_until_changed(
        self, start_ingress: StartIngress, repo: str
    ) -> None:
        async with start_ingress() as running:
            await trust(running, repo)
            await link(running, Provider.SLACK, "U0HUMAN", "user-ada")
            root = ts()
            thread_id = ids.slack_thread(fake_slack.TEAM, CHANNEL, root)
            await running.send(slack_mention(f"model=o3 effort=high fix it repo:{ORG}/{repo}", at=root))
            fields = await running.metadata.get(thread_id)
            assert (fields.model, fields.effort) == ("o3", "high")
            assert await running.wakes(Role.CODER, thread_id) == 1

            await running.send(slack_mention("and the docs too", at=ts(), thread_ts=root))
            fields = await running.metadata.get(thread_id)
            assert (fields.model, fields.effort) == ("o3", "high")

            await running.send(slack_mention("model=gpt-4.1 now", at=ts(), thread_ts=root))
            fields = await running.metadata.get(thread_id)
            assert fields.model == "gpt-4.1"
            assert fields.effort is None

            await running.send(slack_mention("effort=low", at=ts(), thread_ts=root))
            fields = await running.metadata.get(thread_id)
            assert (fields.model, fields.effort) == ("gpt-4.1", "low")
            assert len(await running.inbox(thread_id)) == 4

    async def test_an_unknown_model_is_answered_with_the_valid_ones_and_starts_nothing(
        self, start_ingress: StartIngress, settings: Settings, repo: str
    ) -> None:
        async with fake_slack.FakeSlack("xoxb-test") as slack:
            sections = {"slack": {"bot_token": "xoxb-test", "api_url": slack.api_url}}
            outbound = Outbound.from_settings(ingress_settings(settings, **sections))
            async with start_ingress(outbound=outbound, **sections) as running:
                await trust(running, repo)
                await link(running, Provider.SLACK, "U0HUMAN")
                text = f"<@{fake_slack.BOT_USER}> model=gpt-7-ultra fix it repo:{ORG}/{repo}"
                at = slack.state.add_message(CHANNEL, text)
                before = await running.stream_marks()
                response = await running.send(
                    signing.slack_event(SLACK_SECRET, fake_slack.app_mention(CHANNEL, at, text))
                )
                assert response.status_code == 200, response.text
                await eventually(lambda: bool(slack.state.replies_in(CHANNEL, at)))
                (answer,) = slack.state.replies_in(CHANNEL, at)
                assert "unknown model 'gpt-7-ultra'" in answer.text
                assert "gpt-5.2" in answer.text
                assert "o4-mini" in answer.text
                assert await running.stream_marks() == before
                assert await running.metadata.find(ids.slack_thread(fake_slack.TEAM, CHANNEL, at)) is None


class TestGithub:
    async def test_a_mention_sets_the_model_of_the_issues_thread(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await trust(running, repo)
            body = "@drydock model=gpt-5-mini effort=minimal please fix the typo."
            await running.send(
                signing.github(GITHUB_SECRET, "issue_comment", webhooks.issue_comment(ORG, repo, 3, body))
            )
            fields = await running.metadata.get(ids.github_issue(HOST, ORG, repo, 3))
            assert (fields.model, fields.effort) == ("gpt-5-mini", "minimal")

    async def test_an_effort_the_model_does_not_take_is_answered_on_the_issue(
        self, start_ingress: StartIngress, settings: Settings, repo: str
    ) -> None:
        async with FakeGithub() as github:
            app = github.create_app("drydock")
            installation = github.install(app, ORG, [repo], permissions=PERMISSIONS)
            sections = {"github": {"app_id": app.id, "private_key": app.private_key_pem, "api_url": github.base_url}}
            outbound = Outbound.from_settings(ingress_settings(settings, **sections))
            async with start_ingress(outbound=outbound, **sections) as running:
                await trust(running, repo)
                activity_of(github.state).open_issue(f"{ORG}/{repo}", 4)
                body = "@drydock model=gpt-4.1 effort=high fix it"
                payload = webhooks.issue_comment(ORG, repo, 4, body, installation_id=installation.id)
                before = await running.stream_marks()
                await running.send(signing.github(GITHUB_SECRET, "issue_comment", payload))
                await eventually(lambda: len(activity_of(github.state).comments_on(f"{ORG}/{repo}", 4)) > 0)
                (answer,) = activity_of(github.state).comments_on(f"{ORG}/{repo}", 4)
                assert "model 'gpt-4.1' takes no reasoning effort" in answer.body
                assert await running.stream_marks() == before
                assert await running.metadata.find(ids.github_issue(HOST, ORG, repo, 4)) is None

    async def test_options_in_code_are_not_a_choice(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await trust(running, repo)
            body = "@drydock why does `load(model=resnet)` fail?"
            await running.send(
                signing.github(GITHUB_SECRET, "issue_comment", webhooks.issue_comment(ORG, repo, 5, body))
            )
            fields = await running.metadata.get(ids.github_issue(HOST, ORG, repo, 5))
            assert fields.model is None


class TestLinear:
    async def test_a_comment_mention_sets_the_model(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await trust(running, repo)
            await link(running, Provider.LINEAR, "user-human-1", "user-ada")
            issue = fake_linear.LinearIssue(str(uuid.uuid4()), "DRY-9", "Tidy up")
            payload = fake_linear.comment_created(issue, f"@drydock effort=xhigh model=gpt-5.2 repo:{ORG}/{repo}")
            await running.send(signing.linear(LINEAR_SECRET, payload))
            fields = await running.metadata.get(ids.linear_issue(fake_linear.ORGANIZATION, issue.id))
            assert (fields.model, fields.effort) == ("gpt-5.2", "xhigh")
