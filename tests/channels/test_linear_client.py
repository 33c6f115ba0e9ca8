"""The Linear client (GraphQL over httpx) against the fake Linear API over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.channels.errors import ChannelNotConfigured, OutboundFailed
from drydock.channels.linear.client import LinearClient
from drydock.channels.linear.reply import LinearReplies
from drydock.channels.linear.status import LinearStatus
from drydock.channels.run_status import RunStatus
from drydock.config import LinearSettings
from tests.fakes.linear import FakeLinear


@pytest.fixture
async def linear() -> AsyncIterator[FakeLinear]:
    async with FakeLinear("lin_api_test") as fake:
        yield fake


@pytest.fixture
async def client(linear: FakeLinear) -> AsyncIterator[LinearClient]:
    client = LinearClient(LinearSettings.model_validate({"api_key": "lin_api_test", "api_url": linear.api_url}))
    yield client
    await client.aclose()


class TestLinearClient:
    async def test_an_issue_with_its_comments(self, linear: FakeLinear, client: LinearClient) -> None:
        issue = linear.state.add_issue("Fix login", "It fails on Safari")
        linear.state.add_comment(issue.id, "first")
        linear.state.add_comment(issue.id, "second", user_name="Grace")
        fetched = await client.issue(issue.id)
        assert (fetched.identifier, fetched.title, fetched.description) == (
            issue.identifier,
            "Fix login",
            "It fails on Safari",
        )
        assert [(c.body, c.author_name) for c in fetched.comments] == [("first", "Ada"), ("second", "Grace")]

    async def test_comments_and_activities(self, linear: FakeLinear, client: LinearClient) -> None:
        issue = linear.state.add_issue()
        parent = linear.state.add_comment(issue.id, "@drydock?")
        comment_id = await client.create_comment(issue.id, "Here.", parent_id=parent.id)
        created = next(c for c in linear.state.comments if c.id == comment_id)
        assert (created.body, created.parent_id) == ("Here.", parent.id)
        session = linear.state.add_session()
        await client.create_agent_activity(session, "thought", "Thinking")
        assert [(a.agent_session_id, a.type, a.body) for a in linear.state.activities] == [
            (session, "thought", "Thinking")
        ]

    async def test_errors_become_outbound_failures(self, linear: FakeLinear, client: LinearClient) -> None:
        with pytest.raises(OutboundFailed, match="Entity not found"):
            await client.issue("missing")
        with pytest.raises(OutboundFailed, match="Entity not found"):
            await client.create_agent_activity("no-such-session", "thought", "x")
        wrong = LinearClient(LinearSettings.model_validate({"api_key": "lin_api_wrong", "api_url": linear.api_url}))
        try:
            with pytest.raises(OutboundFailed, match="AUTHENTICATION_ERROR") as refused:
                await wrong.issue("any")
            assert refused.value.status == 400
        finally:
            await wrong.aclose()
        linear.state.rate_limited = True
        with pytest.raises(OutboundFailed) as limited:
            await client.issue("any")
        assert limited.value.status == 429

    async def test_replies_and_status_in_an_agent_session(self, linear: FakeLinear, client: LinearClient) -> None:
        issue, session = linear.state.add_issue(), linear.state.add_session()
        where = ReplyAddress(
            channel=Channel.LINEAR, address={"organization": "o", "issue_id": issue.id, "agent_session_id": session}
        )
        await LinearStatus(client).show(where, RunStatus.WORKING)
        await LinearReplies(client).reply(where, "Done: opened a pull request.")
        await LinearStatus(client).show(where, RunStatus.FINISHED)
        await LinearStatus(client).show(where, RunStatus.STEP_LIMIT)
        assert [(a.type, a.body) for a in linear.state.activities] == [
            ("thought", "Working…"),
            ("response", "Done: opened a pull request."),
            ("error", "Stopped at the step limit."),
        ]

    async def test_replies_without_a_session_are_comments(self, linear: FakeLinear, client: LinearClient) -> None:
        issue = linear.state.add_issue()
        where = ReplyAddress(channel=Channel.LINEAR, address={"organization": "o", "issue_id": issue.id})
        await LinearReplies(client).reply(where, "Answered.")
        assert await LinearStatus(client).show(where, RunStatus.WORKING) == {}
        assert [c.body for c in linear.state.comments_on(issue.id)] == ["Answered."]

    async def test_without_a_key_the_client_is_refused(self) -> None:
        with pytest.raises(ChannelNotConfigured):
            LinearClient(LinearSettings())
