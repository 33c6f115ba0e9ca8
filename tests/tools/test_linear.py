"""``linear`` against the fake Linear: reading an issue, commenting (in the thread's own
conversation or on another issue) and moving an issue to another workflow state."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from drydock.bus import Bus
from drydock.bus.envelopes import Channel, EventType, ReplyAddress
from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.effects import bound_call
from drydock.tools import linear
from tests.fakes.linear import AGENT_USER, ORGANIZATION, FakeLinear, LinearIssue
from tests.tools.channel_fixtures import configured, last_event
from tests.tools.conftest import MakeContext, github_reply_to


@pytest.fixture(scope="module")
async def fake() -> AsyncIterator[FakeLinear]:
    async with FakeLinear() as server:
        yield server


@pytest.fixture
async def outbound(settings: Settings, fake: FakeLinear) -> AsyncIterator[Outbound]:
    clients = Outbound.from_settings(
        configured(settings, linear={"api_key": fake.state.api_key, "api_url": fake.api_url})
    )
    yield clients
    await clients.aclose()


@pytest.fixture
def issue(fake: FakeLinear) -> LinearIssue:
    return fake.state.add_issue("Widgets wobble", "They wobble when spun.")


def from_comment(fake: FakeLinear, issue: LinearIssue) -> ReplyAddress:
    comment = fake.state.add_comment(issue.id, "@drydock can you fix this?")
    address = {"organization": ORGANIZATION, "issue_id": issue.id, "parent_comment_id": comment.id}
    return ReplyAddress(channel=Channel.LINEAR, address=address)


class TestGetIssue:
    async def test_the_thread_s_issue_by_default(
        self, fake: FakeLinear, issue: LinearIssue, outbound: Outbound, make_context: MakeContext
    ) -> None:
        tool = linear.build(make_context(reply_to=from_comment(fake, issue), outbound=outbound))

        found = await tool.ainvoke({"action": "get_issue"})

        assert (found["identifier"], found["title"], found["description"], found["state"]) == (
            issue.identifier,
            "Widgets wobble",
            "They wobble when spun.",
            "Todo",
        )
        assert [(c["author"], c["body"]) for c in found["comments"]] == [("Ada", "@drydock can you fix this?")]

    async def test_another_issue_by_its_identifier(
        self, fake: FakeLinear, issue: LinearIssue, outbound: Outbound, make_context: MakeContext
    ) -> None:
        other = fake.state.add_issue("Gadgets too")
        tool = linear.build(make_context(reply_to=from_comment(fake, issue), outbound=outbound))

        found = await tool.ainvoke({"action": "get_issue", "issue_id": other.identifier})

        assert (found["id"], found["title"]) == (other.id, "Gadgets too")

    async def test_an_unknown_issue_is_reported(self, outbound: Outbound, make_context: MakeContext) -> None:
        tool = linear.build(make_context(outbound=outbound))

        answer = await tool.ainvoke({"action": "get_issue", "issue_id": "DRY-99999"})

        assert "Entity not found: Issue" in answer


class TestReplay:
    async def test_a_replayed_comment_on_another_issue_is_posted_once(
        self, fake: FakeLinear, issue: LinearIssue, outbound: Outbound, make_context: MakeContext
    ) -> None:
        other = fake.state.add_issue("Related")
        tool = linear.build(make_context(reply_to=from_comment(fake, issue), outbound=outbound))

        for _ in range(2):
            with bound_call("step-12.0"):
                await tool.ainvoke({"action": "comment", "issue_id": other.id, "body": "Same cause."})

        assert [c.body for c in fake.state.comments_on(other.id)] == ["Same cause."]

    async def test_a_replayed_reply_on_the_thread_s_issue_is_posted_once(
        self, fake: FakeLinear, issue: LinearIssue, outbound: Outbound, make_context: MakeContext
    ) -> None:
        tool = linear.build(make_context(reply_to=from_comment(fake, issue), outbound=outbound))
        before = len(fake.state.comments_on(issue.id))

        for _ in range(2):
            with bound_call("step-12.0"):
                await tool.ainvoke({"action": "comment", "body": "Done."})

        assert len(fake.state.comments_on(issue.id)) == before + 1


class TestComment:
    async def test_on_the_thread_s_issue_it_answers_in_the_triggering_comment_s_thread(
        self,
        fake: FakeLinear,
        issue: LinearIssue,
        outbound: Outbound,
        make_context: MakeContext,
        bus: Bus,
        thread_id: str,
    ) -> None:
        address = from_comment(fake, issue)
        tool = linear.build(make_context(reply_to=address, outbound=outbound))

        await tool.ainvoke({"action": "comment", "body": "Fixed in acme/widgets#8."})

        reply = fake.state.comments_on(issue.id)[-1]
        assert (reply.body, reply.user_id, reply.parent_id) == (
            "Fixed in acme/widgets#8.",
            AGENT_USER,
            address.address["parent_comment_id"],
        )
        event = await last_event(bus, thread_id, EventType.MESSAGE_POSTED)
        assert event is not None
        assert event.data == {"channel": "linear", "target": issue.id, "url": None}

    async def test_in_an_agent_session_it_answers_with_a_response_activity(
        self, fake: FakeLinear, issue: LinearIssue, outbound: Outbound, make_context: MakeContext
    ) -> None:
        session = fake.state.add_session()
        address = {"organization": ORGANIZATION, "issue_id": issue.id, "agent_session_id": session}
        tool = linear.build(
            make_context(reply_to=ReplyAddress(channel=Channel.LINEAR, address=address), outbound=outbound)
        )

        await tool.ainvoke({"action": "comment", "body": "Done."})

        [activity] = [a for a in fake.state.activities if a.agent_session_id == session]
        assert (activity.type, activity.body) == ("response", "Done.")

    async def test_on_another_issue_it_is_a_new_comment(
        self, fake: FakeLinear, issue: LinearIssue, outbound: Outbound, make_context: MakeContext
    ) -> None:
        other = fake.state.add_issue("Related")
        tool = linear.build(make_context(reply_to=from_comment(fake, issue), outbound=outbound))

        result = await tool.ainvoke({"action": "comment", "issue_id": other.id, "body": "Same cause as the wobble."})

        [comment] = fake.state.comments_on(other.id)
        assert (comment.body, comment.parent_id, comment.id) == (
            "Same cause as the wobble.",
            None,
            result["comment_id"],
        )

    async def test_a_body_is_required(
        self, fake: FakeLinear, issue: LinearIssue, outbound: Outbound, make_context: MakeContext
    ) -> None:
        tool = linear.build(make_context(reply_to=from_comment(fake, issue), outbound=outbound))

        answer = await tool.ainvoke({"action": "comment"})

        assert answer == "action=comment needs a `body`."
        assert len(fake.state.comments_on(issue.id)) == 1


class TestUpdateState:
    async def test_moves_the_issue_to_the_named_state(
        self, fake: FakeLinear, issue: LinearIssue, outbound: Outbound, make_context: MakeContext
    ) -> None:
        tool = linear.build(make_context(reply_to=from_comment(fake, issue), outbound=outbound))

        result = await tool.ainvoke({"action": "update_state", "state": "in progress"})

        assert fake.state.state_of(issue) == fake.state.state_named("In Progress")
        assert result == {"issue": issue.identifier, "state": "In Progress", "previous": "Todo", "changed": True}

    async def test_the_current_state_is_left_alone(
        self, fake: FakeLinear, issue: LinearIssue, outbound: Outbound, make_context: MakeContext
    ) -> None:
        tool = linear.build(make_context(reply_to=from_comment(fake, issue), outbound=outbound))

        result = await tool.ainvoke({"action": "update_state", "state": "Todo"})

        assert result == {"issue": issue.identifier, "state": "Todo", "changed": False}

    async def test_an_unknown_state_lists_the_team_s_states(
        self, fake: FakeLinear, issue: LinearIssue, outbound: Outbound, make_context: MakeContext
    ) -> None:
        tool = linear.build(make_context(reply_to=from_comment(fake, issue), outbound=outbound))

        answer = await tool.ainvoke({"action": "update_state", "state": "Shipped"})

        assert answer == (
            f"Linear has no state 'Shipped' for {issue.identifier}; choose one of: "
            "Backlog, Todo, In Progress, In Review, Done, Canceled."
        )
        assert fake.state.state_of(issue) == fake.state.state_named("Todo")


class TestRefusals:
    async def test_a_thread_from_elsewhere_must_name_the_issue(
        self, outbound: Outbound, make_context: MakeContext
    ) -> None:
        tool = linear.build(make_context(reply_to=github_reply_to(), outbound=outbound))

        answer = await tool.ainvoke({"action": "get_issue"})

        assert answer == "This thread did not come from a Linear issue; give `issue_id`."

    async def test_without_linear_credentials_it_says_so(
        self, fake: FakeLinear, issue: LinearIssue, make_context: MakeContext
    ) -> None:
        tool = linear.build(make_context(reply_to=from_comment(fake, issue)))

        answer = await tool.ainvoke({"action": "get_issue"})

        assert answer == "Linear is not configured for this Drydock installation."
