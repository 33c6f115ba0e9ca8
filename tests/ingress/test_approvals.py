"""``@drydock approve`` through the real ingress (signed Slack events, real NATS and Valkey): the
thread's owner approves its held plan and held pushes, and the message wakes the coder; anyone
else is answered in the thread and nothing is approved."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from drydock.accounts import Provider
from drydock.bus import EventType, RunEvent
from drydock.bus.streams import EVENTS_STREAM
from drydock.channels.buttons import APPROVE_ACTION
from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.infra.server_keys import ServerKeys
from drydock.roles import Role
from drydock.threads import ids
from drydock.threads.approvals import NOT_OWNER_TEXT, Approvals, PushHold, RefUpdate, State, change_id
from tests.fakes import signing
from tests.fakes import slack as fake_slack
from tests.fakes.slack import FakeSlack
from tests.ingress.conftest import ORG, SLACK_SECRET, RunningIngress, StartIngress, ingress_settings, link, trust
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
