from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, TodoListMiddleware
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from drydock.middleware.empty_reply import COMPLETION, CONFIRM, CONTINUE, NUDGE_TOOLS, EmptyReplies, EmptyReplyNudge
from drydock.roles import Role
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import chat_model


@tool
async def execute(command: str) -> str:
    """Run a shell command."""
    return "ok"


def _nudges(messages: list[object]) -> list[tuple[str, dict[str, object]]]:
    return [
        (call["name"], call["args"])
        for m in messages
        if isinstance(m, AIMessage)
        for call in m.tool_calls
        if call["name"] in NUDGE_TOOLS
    ]


class TestEmptyReplyNudge:
    async def test_an_empty_reply_becomes_a_confirm_completion_call(self) -> None:
        script = Script().tool_call("execute", command="make").empty().reply("Pushed and replied on the issue.")
        async with ScriptedModelServer(script) as server:
            agent = create_agent(chat_model(server), [execute], middleware=[EmptyReplyNudge()])
            result = await agent.ainvoke({"messages": [HumanMessage("fix it")]})

        assert _nudges(result["messages"]) == [(CONFIRM, {})]
        answer = next(m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == CONFIRM)
        assert "If the work is complete" in answer.text
        third = server.requests[2]
        assert third.messages[-2]["tool_calls"][0]["function"]["name"] == CONFIRM
        assert "If the work is complete" in third.texts("tool")[-1]
        assert result["messages"][-1].text == "Pushed and replied on the issue."

    async def test_the_nudge_tools_are_hidden_from_the_model(self) -> None:
        async with ScriptedModelServer(Script().empty().reply("done")) as server:
            agent = create_agent(chat_model(server), [execute], middleware=[EmptyReplyNudge()])
            await agent.ainvoke({"messages": [HumanMessage("fix it")]})

        assert all(request.tool_names == ["execute"] for request in server.requests)

    async def test_with_open_plan_items_it_is_a_continue_call_naming_the_next(self) -> None:
        todos = [
            {"content": "reproduce the bug", "status": "completed"},
            {"content": "write the fix", "status": "in_progress"},
            {"content": "open the pull request", "status": "pending"},
        ]
        script = Script().tool_call("write_todos", todos=todos).empty().reply("continuing")
        async with ScriptedModelServer(script) as server:
            middleware: list[AgentMiddleware[Any, Any, Any]] = [TodoListMiddleware(), EmptyReplyNudge()]
            agent = create_agent(chat_model(server), [], middleware=middleware)
            result = await agent.ainvoke({"messages": [HumanMessage("fix it")]})

        assert _nudges(result["messages"]) == [(CONTINUE, {"next_step": "write the fix"})]
        assert "The next open item is: write the fix." in server.requests[2].texts("tool")[-1]

    async def test_a_model_that_stays_empty_fails_the_run(self) -> None:
        script = Script().empty().empty().empty().reply("unreachable")
        async with ScriptedModelServer(script) as server:
            agent = create_agent(chat_model(server), [], middleware=[EmptyReplyNudge(max_nudges=2)])
            with pytest.raises(EmptyReplies, match="3 times in a row"):
                await agent.ainvoke({"messages": [HumanMessage("fix it")]})

        assert len(server.requests) == 3

    async def test_a_streamed_empty_reply_is_nudged_too(self) -> None:
        async with ScriptedModelServer(Script().empty().reply("done")) as server:
            agent = create_agent(chat_model(server), [], middleware=[EmptyReplyNudge()])
            async for _ in agent.astream({"messages": [HumanMessage("fix it")]}, stream_mode="messages"):
                pass

        assert all(request.stream for request in server.requests)
        assert server.requests[1].messages[-2]["tool_calls"][0]["function"]["name"] == CONFIRM

    async def test_a_reply_with_text_is_left_alone(self) -> None:
        async with ScriptedModelServer(Script().reply("All done.")) as server:
            agent = create_agent(chat_model(server), [], middleware=[EmptyReplyNudge()])
            result = await agent.ainvoke({"messages": [HumanMessage("fix it")]})

        assert _nudges(result["messages"]) == []
        assert len(server.requests) == 1

    def test_at_least_one_nudge(self) -> None:
        with pytest.raises(ValueError, match="at least 1"):
            EmptyReplyNudge(max_nudges=0)


class TestCompletionPerRole:
    def test_only_the_coder_is_told_to_commit_push_and_open_a_pull_request(self) -> None:
        assert all(word in COMPLETION[Role.CODER] for word in ("committed", "pushed", "pull request"))
        for role in (Role.REVIEWER, Role.ANALYZER):
            assert not any(word in COMPLETION[role].lower() for word in ("commit", "push", "pull request")), role

    async def test_the_reviewers_nudge_asks_for_the_published_review(self) -> None:
        async with ScriptedModelServer(Script().empty().reply("Published.")) as server:
            nudge = EmptyReplyNudge(role=Role.REVIEWER)
            agent = create_agent(chat_model(server), [], middleware=[nudge])
            result = await agent.ainvoke({"messages": [HumanMessage("review it")]})

        answer = next(m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == CONFIRM)
        assert answer.text == COMPLETION[Role.REVIEWER]
        assert "`publish_review`" in server.requests[1].texts("tool")[-1]

    async def test_the_analyzers_nudge_asks_for_the_saved_guidelines(self) -> None:
        async with ScriptedModelServer(Script().empty().reply("Saved.")) as server:
            agent = create_agent(chat_model(server), [], middleware=[EmptyReplyNudge(role=Role.ANALYZER)])
            await agent.ainvoke({"messages": [HumanMessage("learn")]})

        assert "`save_guidelines`" in server.requests[1].texts("tool")[-1]
