"""``@drydock approve`` through the real ingress (signed Slack events, real NATS and Valkey): the
thread's owner approves its held plan and held pushes, and the message wakes the coder; anyone
else is answered in the thread and nothing is approved."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from structlog.testing import capture_logs

from drydock.accounts import Provider
from drydock.bus import EventType, RunEvent
from drydock.bus.streams import EVENTS_STREAM
from drydock.channels.buttons import APPROVE_ACTION
from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.infra.server_keys import ServerKeys
from drydock.roles import Role
from drydock.threads import ids
from drydock.threads.approvals import (
    NOT_OWNER_TEXT,
    WRITTEN_BEFORE_TEXT,
    Approvals,
    PushHold,
    RefUpdate,
    State,
    change_id,
)
from tests.fakes import signing
from tests.fakes import slack as fake_slack
from tests.fakes.github import FakeGithub, webhooks
from tests.fakes.github.activity import activity_of
from tests.fakes.slack import FakeSlack
from tests.ingress.conftest import (
    GITHUB_SECRET,
    HOST,
    ORG,
    SLACK_SECRET,
    RunningIngress,
    StartIngress,
    ingress_settings,
    link,
    trust,
)
from tests.waiting import eventually

CHANNEL = "C0GENERAL"


@pytest.fixture
async def stage(
    start_ingress: StartIngress, settings: Settings, repo: str
) -> AsyncIterator[tuple[RunningIngress, FakeSlack]]:
    async with fake_slack.FakeSlack("xoxb-test") as slack:
        sections = {"slack": {"bot_token": "xoxb-test", "api_url": slack.api_url}}
        outbound = Outbound.from_settings(ingress_settings(settings, **sections))
        async with start_ingress(outbound=outbound, **sections) as running:
            await trust(running, repo)
            await link(running, Provider.SLACK, "U0ADA", "user-ada")
            await link(running, Provider.SLACK, "U0BOB", "user-bob")
            yield running, slack


def mention(
    slack: FakeSlack, text: str, *, user: str, thread_ts: str | None = None
) -> tuple[str, signing.SignedRequest]:
    body = f"<@{fake_slack.BOT_USER}> {text}"
    ts = slack.state.add_message(CHANNEL, body, user=user)
    payload = fake_slack.app_mention(CHANNEL, ts, body, user=user, thread_ts=thread_ts)
    return ts, signing.slack_event(SLACK_SECRET, payload)


class TestApproveInTheSourceChannel:
    async def test_only_the_owner_approves_and_the_approval_wakes_the_coder(
        self, stage: tuple[RunningIngress, FakeSlack], server_keys: ServerKeys, repo: str
    ) -> None:
        running, slack = stage
        at, request = mention(slack, f"fix the build repo:{ORG}/{repo}", user="U0ADA")
        assert (await running.send(request)).status_code == 200
        thread_id = ids.slack_thread(fake_slack.TEAM, CHANNEL, at)
        approvals = Approvals(running.ingress.runtime.redis, running.keys, server_keys)
        await approvals.submit_plan(thread_id, "Fix the build", [{"content": "pin the compiler"}])
        update = RefUpdate("a" * 40, "b" * 40, "refs/heads/drydock/x")
        change = change_id(f"{ORG}/{repo}", [update])
        await approvals.hold(
            PushHold(thread_id, change, f"{ORG}/{repo}", (update,), (".github/workflows/ci.yml",), State.HELD,
                     datetime.now(UTC))
        )  # fmt: skip
        wakes = await running.wakes(Role.CODER, thread_id)

        _, request = mention(slack, "approve", user="U0BOB", thread_ts=at)
        assert (await running.send(request)).status_code == 200
        await eventually(lambda: any(NOT_OWNER_TEXT in r.text for r in slack.state.replies_in(CHANNEL, at)))
        plan, holds = await approvals.pending(thread_id)
        assert plan is not None
        assert [hold.change for hold in holds] == [change]
        assert await running.wakes(Role.CODER, thread_id) == wakes

        _, request = mention(slack, "approve", user="U0ADA", thread_ts=at)
        assert (await running.send(request)).status_code == 200
        assert await approvals.pending(thread_id) == (None, [])
        approved_plan = await approvals.plan(thread_id)
        assert approved_plan is not None
        assert (approved_plan.approved_by, approved_plan.revision) == ("user-ada", 1)
        assert await running.wakes(Role.CODER, thread_id) == wakes + 1
        inbox = await running.inbox(thread_id)
        assert inbox[-1].author.user_id == "user-ada"
        stored = await running.bus.js.get_last_msg(EVENTS_STREAM, f"drydock.event.{thread_id}.{EventType.APPROVED}")
        assert stored.data is not None
        event = RunEvent.model_validate_json(stored.data)
        assert (event.data["by"], event.data["plan"], event.data["pushes"]) == ("user-ada", 1, [change])


class TestApproveButton:
    async def test_the_owner_presses_approve_in_slack(
        self, stage: tuple[RunningIngress, FakeSlack], server_keys: ServerKeys, repo: str
    ) -> None:
        running, slack = stage
        at, request = mention(slack, f"fix the build repo:{ORG}/{repo}", user="U0ADA")
        assert (await running.send(request)).status_code == 200
        thread_id = ids.slack_thread(fake_slack.TEAM, CHANNEL, at)
        approvals = Approvals(running.ingress.runtime.redis, running.keys, server_keys)
        await approvals.submit_plan(thread_id, "Fix the build", [{"content": "pin the compiler"}])
        notice = slack.state.add_message(CHANNEL, "Plan (revision 1)", user=fake_slack.BOT_USER, thread_ts=at)

        def press(user: str) -> signing.SignedRequest:
            payload = fake_slack.block_actions(CHANNEL, notice, APPROVE_ACTION, "approve", user=user, thread_ts=at)
            return signing.slack_interaction(SLACK_SECRET, payload)

        assert (await running.send(press("U0BOB"))).status_code == 200
        plan = await approvals.plan(thread_id)
        assert plan is not None
        assert not plan.approved
        assert (await running.send(press("U0ADA"))).status_code == 200
        plan = await approvals.plan(thread_id)
        assert plan is not None
        assert plan.approved_by == "user-ada"


class TestApprovalTimes:
    """GitHub signs no delivery time and its delivery id is not signed: a captured ``approve``
    can be sent again under a new id, so a comment approves only what was held when it was written."""

    @pytest.fixture
    async def github_stage(
        self, start_ingress: StartIngress, settings: Settings, repo: str
    ) -> AsyncIterator[tuple[RunningIngress, FakeGithub, int]]:
        async with FakeGithub() as github:
            app = github.create_app("drydock")
            installation = github.install(app, ORG, [repo], permissions={"issues": "write", "metadata": "read"})
            sections = {"github": {"app_id": app.id, "private_key": app.private_key_pem, "api_url": github.base_url}}
            outbound = Outbound.from_settings(ingress_settings(settings, **sections))
            async with start_ingress(outbound=outbound, **sections) as running:
                await trust(running, repo)
                await link(running, Provider.GITHUB, "4242", "user-ada")
                activity_of(github.state).open_issue(f"{ORG}/{repo}", 1)
                yield running, github, installation.id

    async def held_push(self, running: RunningIngress, approvals: Approvals, repo: str) -> tuple[str, str]:
        owner = webhooks.user("ada", 4242)
        start = webhooks.issue_comment(ORG, repo, 1, "@drydock fix CI", author=owner)
        assert (await running.send(signing.github(GITHUB_SECRET, "issue_comment", start))).status_code == 200
        thread_id = ids.github_issue(HOST, ORG, repo, 1)
        update = RefUpdate("a" * 40, "b" * 40, "refs/heads/drydock/x")
        change = change_id(f"{ORG}/{repo}", [update])
        await approvals.hold(
            PushHold(thread_id, change, f"{ORG}/{repo}", (update,), (".github/workflows/ci.yml",), State.HELD,
                     datetime.now(UTC))
        )  # fmt: skip
        return thread_id, change

    def approve(self, repo: str, installation_id: int, written_at: datetime) -> signing.SignedRequest:
        payload = webhooks.issue_comment(
            ORG, repo, 1, "@drydock approve", author=webhooks.user("ada", 4242), installation_id=installation_id
        )
        payload["comment"]["created_at"] = written_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        return signing.github(GITHUB_SECRET, "issue_comment", payload)

    async def test_an_approval_written_before_the_hold_is_refused(
        self, github_stage: tuple[RunningIngress, FakeGithub, int], server_keys: ServerKeys, repo: str
    ) -> None:
        running, github, installation_id = github_stage
        approvals = Approvals(running.ingress.runtime.redis, running.keys, server_keys)
        thread_id, change = await self.held_push(running, approvals, repo)
        wakes = await running.wakes(Role.CODER, thread_id)
        with capture_logs() as logs:
            written = datetime.now(UTC) - timedelta(minutes=5)
            assert (await running.send(self.approve(repo, installation_id, written))).status_code == 200
        await eventually(
            lambda: any(
                WRITTEN_BEFORE_TEXT in c.body for c in activity_of(github.state).comments_on(f"{ORG}/{repo}", 1)
            )
        )
        assert [hold.change for hold in (await approvals.pending(thread_id))[1]] == [change]
        assert await running.wakes(Role.CODER, thread_id) == wakes
        assert any(entry["event"] == "approval written before what waits refused" for entry in logs)

    async def test_an_approval_written_after_the_hold_approves_it(
        self, github_stage: tuple[RunningIngress, FakeGithub, int], server_keys: ServerKeys, repo: str
    ) -> None:
        running, _, installation_id = github_stage
        approvals = Approvals(running.ingress.runtime.redis, running.keys, server_keys)
        thread_id, change = await self.held_push(running, approvals, repo)
        wakes = await running.wakes(Role.CODER, thread_id)
        # GitHub gives whole seconds: the next one is surely after the hold.
        written = datetime.now(UTC) + timedelta(seconds=1)
        assert (await running.send(self.approve(repo, installation_id, written))).status_code == 200
        assert await approvals.pending(thread_id) == (None, [])
        hold = await approvals.push(thread_id, change)
        assert hold is not None
        assert hold.approved_by == "user-ada"
        assert await running.wakes(Role.CODER, thread_id) == wakes + 1
