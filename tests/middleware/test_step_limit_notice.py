from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from drydock.middleware.model_call_limit import ModelCallLimit
from drydock.middleware.step_limit_notice import STEP_LIMIT_NOTICE, StepLimitNotice
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import RecordingNotifier, chat_model


@tool
async def execute(command: str) -> str:
    """Run a shell command."""
    return "ok"


class TestStepLimitNotice:
    async def test_the_source_hears_once_when_the_run_stops_at_the_limit(self) -> None:
        notifier = RecordingNotifier()
        script = Script().tool_call("execute", command="a").tool_call("execute", command="b").reply("unreachable")
        async with ScriptedModelServer(script) as server:
            middleware: list[AgentMiddleware[Any, Any, Any]] = [ModelCallLimit(2), StepLimitNotice(notifier, "t")]
            agent = create_agent(chat_model(server), [execute], middleware=middleware)
            await agent.ainvoke({"messages": [HumanMessage("go")]})

        assert notifier.notices == [STEP_LIMIT_NOTICE]

    async def test_a_run_that_finishes_sends_nothing(self) -> None:
        notifier = RecordingNotifier()
        async with ScriptedModelServer(Script().tool_call("execute", command="a").reply("done")) as server:
            middleware: list[AgentMiddleware[Any, Any, Any]] = [ModelCallLimit(2), StepLimitNotice(notifier, "t")]
            agent = create_agent(chat_model(server), [execute], middleware=middleware)
            await agent.ainvoke({"messages": [HumanMessage("go")]})

        assert notifier.notices == []

    async def test_a_failing_channel_does_not_fail_the_run(self) -> None:
        notifier = RecordingNotifier(fail=True)
        async with ScriptedModelServer(Script().tool_call("execute", command="a")) as server:
            middleware: list[AgentMiddleware[Any, Any, Any]] = [ModelCallLimit(1), StepLimitNotice(notifier, "t")]
            agent = create_agent(chat_model(server), [execute], middleware=middleware)
            result = await agent.ainvoke({"messages": [HumanMessage("go")]})

        assert notifier.notices == [STEP_LIMIT_NOTICE]
        assert "step limit" in result["messages"][-1].text
