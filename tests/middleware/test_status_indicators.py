from __future__ import annotations

from typing import Any

import openai
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from redis.asyncio import Redis

from drydock.channels.run_status import RunStatus
from drydock.infra.redis import Keys
from drydock.middleware.model_call_limit import ModelCallLimit
from drydock.middleware.sandbox_circuit_breaker import SandboxCircuitBreaker
from drydock.middleware.status_indicators import StatusIndicators
from drydock.sandbox.failures import SandboxFailures
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import RecordingStatus, chat_model


@tool
async def execute(command: str) -> str:
    """Run a shell command."""
    return "ok"


class TestStatusIndicators:
    async def test_working_once_then_finished(self) -> None:
        status = RecordingStatus()
        script = Script().tool_call("execute", command="make").tool_call("execute", command="test").reply("done")
        async with ScriptedModelServer(script) as server:
            agent = create_agent(chat_model(server), [execute], middleware=[StatusIndicators(status, "t")])
            await agent.ainvoke({"messages": [HumanMessage("go")]})

        assert len(server.requests) == 3
        assert status.shown == [RunStatus.WORKING, RunStatus.FINISHED]

    async def test_each_run_starts_working_again(self) -> None:
        status = RecordingStatus()
        async with ScriptedModelServer(Script().reply("one").reply("two")) as server:
            agent = create_agent(chat_model(server), [], middleware=[StatusIndicators(status, "t")])
            await agent.ainvoke({"messages": [HumanMessage("first")]})
            await agent.ainvoke({"messages": [HumanMessage("second")]})

        assert status.shown == [RunStatus.WORKING, RunStatus.FINISHED] * 2

    async def test_stopped_at_the_step_limit(self) -> None:
        status = RecordingStatus()
        script = Script().tool_call("execute", command="make").reply("unreachable")
        async with ScriptedModelServer(script) as server:
            middleware: list[AgentMiddleware[Any, Any, Any]] = [ModelCallLimit(1), StatusIndicators(status, "t")]
            agent = create_agent(chat_model(server), [execute], middleware=middleware)
            await agent.ainvoke({"messages": [HumanMessage("go")]})

        assert status.shown == [RunStatus.WORKING, RunStatus.STEP_LIMIT]

    async def test_failed_when_the_model_call_fails_for_good(self) -> None:
        status = RecordingStatus()
        async with ScriptedModelServer(Script().fail(401)) as server:
            agent = create_agent(chat_model(server), [], middleware=[StatusIndicators(status, "t")])
            with pytest.raises(openai.AuthenticationError):
                await agent.ainvoke({"messages": [HumanMessage("go")]})

        assert status.shown == [RunStatus.WORKING, RunStatus.FAILED]
        assert "AuthenticationError" in status.details[-1]

    async def test_failed_when_the_sandbox_circuit_breaker_stops_the_run(
        self, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        failures = SandboxFailures(redis, keys)
        for _ in range(3):
            await failures.record(thread_id)
        status = RecordingStatus()
        async with ScriptedModelServer(Script().reply("unreachable")) as server:
            middleware = [StatusIndicators(status, thread_id), SandboxCircuitBreaker(failures, thread_id)]
            agent = create_agent(chat_model(server), [], middleware=middleware)
            await agent.ainvoke({"messages": [HumanMessage("go")]})

        assert server.requests == []
        assert status.shown == [RunStatus.WORKING, RunStatus.FAILED]

    async def test_a_failing_indicator_does_not_fail_the_run(self) -> None:
        status = RecordingStatus(fail=True)
        async with ScriptedModelServer(Script().reply("done")) as server:
            agent = create_agent(chat_model(server), [], middleware=[StatusIndicators(status, "t")])
            result = await agent.ainvoke({"messages": [HumanMessage("go")]})

        assert result["messages"][-1].text == "done"
        assert status.shown == [RunStatus.WORKING, RunStatus.FINISHED]

    async def test_without_a_reporter_it_does_nothing(self) -> None:
        async with ScriptedModelServer(Script().reply("done")) as server:
            agent = create_agent(chat_model(server), [], middleware=[StatusIndicators(None, "t")])
            result = await agent.ainvoke({"messages": [HumanMessage("go")]})

        assert result["messages"][-1].text == "done"
