"""After answering, the ingress acknowledges pickup in the source (👀 on GitHub and Slack, a
thought or comment in Linear) and answers requests it cannot start (no repository), through
the real clients talking to the fakes over HTTP. It also asks GitHub about organization
membership when ``author_association`` cannot tell."""

from __future__ import annotations

from typing import Any

from structlog.testing import capture_logs

from drydock.accounts import MembershipCache, Provider, RepositorySettings, TeamDefaults
from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.threads import ids
from tests.fakes import linear as fake_linear
from tests.fakes import signing
from tests.fakes import slack as fake_slack
from tests.fakes.github import FakeGithub, webhooks
from tests.fakes.github.activity import activity_of
from tests.fakes.github.state import App, Installation
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

PERMISSIONS = {"issues": "write", "pull_requests": "write", "checks": "write", "metadata": "read", "members": "read"}


def github_sections(app: App, fake: FakeGithub) -> dict[str, Any]:
    return {"app_id": app.id, "private_key": app.private_key_pem, "api_url": fake.base_url}


class TestGithubPickup:
    async def test_a_mention_gets_eyes_on_the_comment(
        self, start_ingress: StartIngress, settings: Settings, github: FakeGithub, repo: str
    ) -> None:
        app = github.create_app("drydock")
        installation = github.install(app, ORG, [repo], permissions=PERMISSIONS)
        sections = {"github": github_sections(app, github)}
        outbound = Outbound.from_settings(ingress_settings(settings, **sections))
        async with start_ingress(outbound=outbound, **sections) as running:
            await trust(running, repo)
            payload = webhooks.issue_comment(ORG, repo, 5, "@drydock please look", installation_id=installation.id)
            comment_id = payload["comment"]["id"]
            activity_of(github.state).add_comment(
                f"{ORG}/{repo}", 5, "@drydock please look", login="octocat", comment_id=comment_id
            )
            response = await running.send(signing.github(GITHUB_SECRET, "issue_comment", payload))
            assert response.status_code == 200
            target = f"issue_comment:{comment_id}"
            await eventually(lambda: bool(activity_of(github.state).reactions_to(target)))
            (reaction,) = activity_of(github.state).reactions_to(target)
            assert (reaction.content, reaction.login) == ("eyes", "drydock[bot]")

    async def test_an_opened_issue_gets_eyes_on_the_issue(
        self, start_ingress: StartIngress, settings: Settings, github: FakeGithub, repo: str
    ) -> None:
        app = github.create_app("drydock")
        installation = github.install(app, ORG, [repo], permissions=PERMISSIONS)
        activity_of(github.state).open_issue(f"{ORG}/{repo}", 8)
        sections = {"github": github_sections(app, github)}
        async with start_ingress(
            outbound=Outbound.from_settings(ingress_settings(settings, **sections)), **sections
        ) as running:
            await trust(running, repo)
            payload = webhooks.issues_opened(ORG, repo, 8, "Bug", "@drydock fix", installation_id=installation.id)
            await running.send(signing.github(GITHUB_SECRET, "issues", payload))
            target = f"issue:{ORG}/{repo}#8".lower()
            await eventually(lambda: bool(activity_of(github.state).reactions_to(target)))


class TestMembership:
    async def _setup(self, github: FakeGithub, repo: str) -> tuple[App, Installation]:
        app = github.create_app("drydock")
        github.install(app, ORG, [], permissions=PERMISSIONS)
        partner = github.install(app, "partner", [repo], permissions=PERMISSIONS)
        activity_of(github.state).add_member(ORG, "alice")
        return app, partner

    async def test_a_member_of_an_allowed_organization_is_trusted_anywhere(
        self, start_ingress: StartIngress, settings: Settings, github: FakeGithub, repo: str
    ) -> None:
        app, partner = await self._setup(github, repo)
        sections = {"github": github_sections(app, github)}
        async with start_ingress(
            outbound=Outbound.from_settings(ingress_settings(settings, **sections)), **sections
        ) as running:
            await running.accounts.save_team(TeamDefaults(allowed_organizations=(ORG,)))
            await running.accounts.save_repository(RepositorySettings(full_name=f"partner/{repo}"))
            for login, number in (("alice", 1), ("bob", 2)):
                payload = webhooks.issue_comment(
                    "partner",
                    repo,
                    number,
                    "@drydock go",
                    author=webhooks.user(login),
                    association="CONTRIBUTOR",
                    installation_id=partner.id,
                )
                await running.send(signing.github(GITHUB_SECRET, "issue_comment", payload))
            assert len(await running.inbox(ids.github_issue(HOST, "partner", repo, 1))) == 1
            assert await running.inbox(ids.github_issue(HOST, "partner", repo, 2)) == []
            cache = MembershipCache(
                running.ingress.runtime.redis, running.keys, host=HOST, ttl=settings.ingress.org_membership_ttl
            )
            assert await cache.get(ORG, "alice") is True
            assert await cache.get(ORG, "bob") is False


class TestSlackPickup:
    async def test_a_mention_gets_eyes_and_a_missing_repository_gets_a_question(
        self, start_ingress: StartIngress, settings: Settings, repo: str
    ) -> None:
        async with fake_slack.FakeSlack("xoxb-test") as slack:
            sections = {"slack": {"bot_token": "xoxb-test", "api_url": slack.api_url}}
            outbound = Outbound.from_settings(ingress_settings(settings, **sections))
            async with start_ingress(outbound=outbound, **sections) as running:
                await trust(running, repo)
                await link(running, Provider.SLACK, "U0HUMAN")
                text = f"<@{fake_slack.BOT_USER}> fix it repo:{ORG}/{repo}"
                ts = slack.state.add_message("C0GENERAL", text)
                payload = fake_slack.app_mention("C0GENERAL", ts, text)
                await running.send(signing.slack_event(SLACK_SECRET, payload))
                await eventually(lambda: bool(slack.state.reactions.get(("C0GENERAL", ts))))
                assert slack.state.reactions[("C0GENERAL", ts)] == [("eyes", fake_slack.BOT_USER)]

                vague = slack.state.add_message("C0GENERAL", f"<@{fake_slack.BOT_USER}> fix it")
                before = await running.stream_marks()
                await running.send(
                    signing.slack_event(SLACK_SECRET, fake_slack.app_mention("C0GENERAL", vague, "<@U0DRYBOT> fix it"))
                )
                await eventually(lambda: bool(slack.state.replies_in("C0GENERAL", vague)))
                (question,) = slack.state.replies_in("C0GENERAL", vague)
                assert "repo:owner/name" in question.text
                assert await running.stream_marks() == before


class TestLinearPickup:
    async def test_a_session_gets_a_thought_and_a_comment_gets_a_reply(
        self, start_ingress: StartIngress, settings: Settings, repo: str
    ) -> None:
        async with fake_linear.FakeLinear("lin_api_test") as linear:
            sections = {"linear": {"api_key": "lin_api_test", "api_url": linear.api_url}}
            outbound = Outbound.from_settings(ingress_settings(settings, **sections))
            async with start_ingress(outbound=outbound, **sections) as running:
                await trust(running, repo)
                await link(running, Provider.LINEAR, "user-human-1")
                issue, session = linear.state.add_issue(), linear.state.add_session()
                created = fake_linear.agent_session_created(issue, session, prompt_context=f"repo:{ORG}/{repo}")
                await running.send(signing.linear(LINEAR_SECRET, created))
                await eventually(lambda: bool(linear.state.activities))
                (thought,) = linear.state.activities
                assert (thought.agent_session_id, thought.type) == (session, "thought")

                other = linear.state.add_issue()
                comment = linear.state.add_comment(other.id, f"@drydock go repo:{ORG}/{repo}")
                payload = fake_linear.comment_created(other, comment.body, comment_id=comment.id)
                await running.send(signing.linear(LINEAR_SECRET, payload))
                await eventually(lambda: len(linear.state.comments_on(other.id)) == 2)
                reply = linear.state.comments_on(other.id)[1]
                assert reply.parent_id == comment.id
                assert reply.body.startswith("👀")


class TestFailures:
    async def test_a_failed_acknowledgement_does_not_change_the_answer(
        self, start_ingress: StartIngress, settings: Settings, repo: str
    ) -> None:
        async with fake_slack.FakeSlack("xoxb-test") as slack:
            slack.state.rate_limited.add("reactions.add")
            sections = {"slack": {"bot_token": "xoxb-test", "api_url": slack.api_url}}
            outbound = Outbound.from_settings(ingress_settings(settings, **sections))
            async with start_ingress(outbound=outbound, **sections) as running:
                await trust(running, repo)
                await link(running, Provider.SLACK, "U0HUMAN")
                ts = slack.state.add_message("C0GENERAL", "x")
                payload = fake_slack.app_mention("C0GENERAL", ts, f"<@U0DRYBOT> go repo:{ORG}/{repo}")
                with capture_logs() as logs:
                    response = await running.send(signing.slack_event(SLACK_SECRET, payload))
                    assert response.status_code == 200
                    await eventually(lambda: any(e["event"] == "pickup acknowledgement failed" for e in logs))
                assert len(await running.inbox(ids.slack_thread(fake_slack.TEAM, "C0GENERAL", ts))) == 1
                (failure,) = [e for e in logs if e["event"] == "pickup acknowledgement failed"]
                assert "ratelimited" in failure["error"]
                assert slack.state.reactions.get(("C0GENERAL", ts)) is None
