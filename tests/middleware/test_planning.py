"""The coder's todo tool: ``write_todos`` with the framework's one-call-per-reply rule, checked
inside the model call instead of in a graph node of its own."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage

from drydock.middleware.planning import PARALLEL_ERROR, Planning
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import chat_model

PLAN = [{"content": "write the fix", "status": "in_progress"}]


class TestPlanning:
    async def test_the_plan_is_kept_in_the_state(self) -> None:
        async with ScriptedModelServer(Script().tool_call("write_todos", todos=PLAN).reply("planned")) as server:
            agent = create_agent(chat_model(server), [], middleware=[Planning()])
            result = await agent.ainvoke({"messages": [HumanMessage("fix it")]})

        assert result["todos"] == PLAN
        assert "write_todos" in server.requests[0].tool_names
        assert "write_todos" in server.requests[0].texts("system")[0]

    async def test_parallel_calls_are_all_refused(self) -> None:
        other = [{"content": "something else", "status": "pending"}]
        script = Script().tool_calls(("write_todos", {"todos": PLAN}), ("write_todos", {"todos": other})).reply("ok")
        async with ScriptedModelServer(script) as server:
            agent = create_agent(chat_model(server), [], middleware=[Planning()])
            result = await agent.ainvoke({"messages": [HumanMessage("fix it")]})

        answers = [m for m in result["messages"] if isinstance(m, ToolMessage)]
        assert [(m.status, m.text) for m in answers] == [("error", PARALLEL_ERROR)] * 2
        assert "todos" not in result or not result["todos"]
        assert len(server.requests) == 2

    async def test_it_adds_no_graph_node_per_step(self) -> None:
        async with ScriptedModelServer() as server:
            agent = create_agent(chat_model(server), [], middleware=[Planning()])
        assert not [name for name in agent.nodes if name.endswith(("before_model", "after_model"))]
        assert Planning().name == "TodoListMiddleware"
