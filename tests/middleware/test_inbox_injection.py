from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph_checkpoint_plainredis import AsyncRedisSaver

from drydock.bus import Author, Bus, Channel, InboxMessage, ReplyAddress
from drydock.middleware.inbox_injection import InboxInjection, inbox_message_id
from drydock.middleware.model_call_limit import ModelCallLimit
from drydock.threads import Inbox
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import chat_model, run_config
from tests.telemetry.spans import named, parent_id, recorded_spans, span_id, trace_id


@pytest.fixture
def inbox(bus: Bus) -> Inbox:
    return Inbox(bus)


def _message(thread_id: str, text: str, author: str = "alice") -> InboxMessage:
    return InboxMessage(
        delivery_id=str(uuid.uuid4()),
        thread_id=thread_id,
        channel=Channel.GITHUB,
        author=Author(channel=Channel.GITHUB, external_id=author, name=author),
        text=text,
        repository="acme/widgets",
        reply_to=ReplyAddress(channel=Channel.GITHUB, address={"issue": "7"}),
    )


def _count(messages: list[BaseMessage], text: str) -> int:
    return sum(1 for m in messages if isinstance(m, HumanMessage) and text in m.text)


def _user_texts_count(texts: list[str], text: str) -> int:
    return sum(1 for t in texts if text in t)


@tool
async def execute(command: str) -> str:
    """Run a shell command."""
    return "ok"


class TestInboxInjection:
    async def test_queued_messages_are_injected_before_the_first_model_call(
        self, inbox: Inbox, checkpointer: AsyncRedisSaver, thread_id: str
    ) -> None:
        await inbox.append(_message(thread_id, "please fix the flaky test"))
        last = await inbox.append(_message(thread_id, "and update the changelog", author="bob"))
        async with ScriptedModelServer(Script().reply("on it")) as server:
            agent = create_agent(
                chat_model(server), [], middleware=[InboxInjection(inbox, thread_id)], checkpointer=checkpointer
            )
            result = await agent.ainvoke({"messages": []}, run_config(thread_id))

        users = server.requests[0].texts("user")
        assert len(users) == 2
        assert "alice wrote on github (acme/widgets)" in users[0]
        assert "please fix the flaky test" in users[0]
        assert "bob wrote" in users[1]
        assert "and update the changelog" in users[1]
        assert result["inbox_cursor"] == last.seq
        assert result["messages"][1].id == inbox_message_id(last.seq)

    async def test_a_message_arriving_mid_run_is_injected_before_the_next_model_call(
        self, inbox: Inbox, checkpointer: AsyncRedisSaver, thread_id: str
    ) -> None:
        await inbox.append(_message(thread_id, "run the tests"))

        @tool
        async def run_tests() -> str:
            """Run the test suite."""
            await inbox.append(_message(thread_id, "also check the linter", author="bob"))
            return "3 passed"

        script = Script().tool_call("run_tests").reply("tests pass, checking the linter")
        async with ScriptedModelServer(script) as server:
            agent = create_agent(
                chat_model(server),
                [run_tests],
                middleware=[InboxInjection(inbox, thread_id)],
                checkpointer=checkpointer,
            )
            result = await agent.ainvoke({"messages": []}, run_config(thread_id))

        first, second = server.requests
        assert _user_texts_count(first.texts("user"), "also check the linter") == 0
        assert _user_texts_count(second.texts("user"), "also check the linter") == 1
        assert second.messages[-1]["role"] == "user"
        assert _count(result["messages"], "run the tests") == 1
        assert _count(result["messages"], "also check the linter") == 1

    async def test_a_later_run_injects_only_what_arrived_since(
        self, inbox: Inbox, checkpointer: AsyncRedisSaver, thread_id: str
    ) -> None:
        await inbox.append(_message(thread_id, "first request"))
        async with ScriptedModelServer(Script().reply("did the first").reply("did the second")) as server:
            agent = create_agent(
                chat_model(server), [], middleware=[InboxInjection(inbox, thread_id)], checkpointer=checkpointer
            )
            await agent.ainvoke({"messages": []}, run_config(thread_id))
            later = await inbox.append(_message(thread_id, "second request"))
            result = await agent.ainvoke({"messages": []}, run_config(thread_id))

        second = server.requests[1].texts("user")
        assert _user_texts_count(second, "first request") == 1
        assert _user_texts_count(second, "second request") == 1
        assert result["inbox_cursor"] == later.seq

    async def test_a_run_resumed_after_a_crash_injects_each_message_exactly_once(
        self, inbox: Inbox, checkpointer: AsyncRedisSaver, thread_id: str
    ) -> None:
        await inbox.append(_message(thread_id, "message A"))
        script = (
            Script().reply("never delivered", latency=30).tool_call("execute", command="make").reply("handled A and B")
        )

        async with ScriptedModelServer(script) as server:
            crashing = create_agent(
                chat_model(server),
                [execute],
                middleware=[InboxInjection(inbox, thread_id)],
                checkpointer=checkpointer,
            )
            run = asyncio.create_task(crashing.ainvoke({"messages": []}, run_config(thread_id), durability="sync"))
            async with asyncio.timeout(10):
                await server.wait_for_requests(1)
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            await inbox.append(_message(thread_id, "message B", author="bob"))

            resumed = create_agent(
                chat_model(server),
                [execute],
                middleware=[InboxInjection(inbox, thread_id)],
                checkpointer=checkpointer,
            )
            result = await resumed.ainvoke(None, run_config(thread_id), durability="sync")

        # The crashed call checkpointed nothing, so the resumed call injects A again, with B.
        crashed, after_resume, after_tool = (request.texts("user") for request in server.requests)
        assert _user_texts_count(crashed, "message A") == 1
        assert _user_texts_count(after_resume, "message A") == 1
        assert _user_texts_count(after_resume, "message B") == 1
        assert _user_texts_count(after_tool, "message A") == 1
        assert _user_texts_count(after_tool, "message B") == 1
        assert _count(result["messages"], "message A") == 1
        assert _count(result["messages"], "message B") == 1
        assert result["messages"][-1].text == "handled A and B"

    async def test_an_empty_inbox_changes_nothing(
        self, inbox: Inbox, checkpointer: AsyncRedisSaver, thread_id: str
    ) -> None:
        async with ScriptedModelServer(Script().reply("hello")) as server:
            agent = create_agent(
                chat_model(server), [], middleware=[InboxInjection(inbox, thread_id)], checkpointer=checkpointer
            )
            result = await agent.ainvoke({"messages": [HumanMessage("hi")]}, run_config(thread_id))

        assert server.requests[0].texts("user") == ["hi"]
        assert "inbox_cursor" not in result


class TestTraceLinks:
    async def test_the_model_call_links_the_traces_the_injected_messages_came_in(
        self, inbox: Inbox, checkpointer: AsyncRedisSaver, thread_id: str
    ) -> None:
        with recorded_spans() as recording:
            with recording.tracer.start_as_current_span("first webhook") as first:
                await inbox.append(_message(thread_id, "please fix the flaky test"))
            with recording.tracer.start_as_current_span("second webhook") as second:
                await inbox.append(_message(thread_id, "and update the changelog", author="bob"))
            stack: list[AgentMiddleware[Any, Any, Any]] = [ModelCallLimit(5), InboxInjection(inbox, thread_id)]
            async with ScriptedModelServer(Script().reply("on it")) as server:
                agent = create_agent(chat_model(server), [], middleware=stack, checkpointer=checkpointer)
                with recording.tracer.start_as_current_span("run") as run:
                    await agent.ainvoke({"messages": []}, run_config(thread_id))

        [call] = [span for span in recording.spans() if span.name.startswith("chat ")]
        assert parent_id(call) == run.get_span_context().span_id
        # Each message carries its publish's span, in its webhook's trace.
        publishes = named(recording.spans(), "publish drydock.inbox")
        assert [parent_id(publish) for publish in publishes] == [
            first.get_span_context().span_id,
            second.get_span_context().span_id,
        ]
        linked = [(link.context.trace_id, link.context.span_id) for link in call.links]
        assert linked == [(trace_id(publish), span_id(publish)) for publish in publishes]
