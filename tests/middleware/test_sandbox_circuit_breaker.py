from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.middleware.outcome import StopReason, stop_reason
from drydock.middleware.sandbox_circuit_breaker import SandboxCircuitBreaker
from drydock.middleware.tool_errors import ToolErrorsAsMessages
from drydock.sandbox.errors import SandboxUnavailable
from drydock.sandbox.failures import SandboxFailures
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import RecordingNotifier, chat_model


class FlakySandbox:
    """An ``execute`` tool whose sandbox fails for the first ``failing`` calls."""

    def __init__(self, failing: int, error: Exception | None = None) -> None:
        self.failing = failing
        self.calls = 0
        self.error = error or SandboxUnavailable("sandbox sb-1: /exec failed: ConnectError")

        @tool
        async def execute(command: str) -> str:
            """Run a shell command in the sandbox."""
            self.calls += 1
            if self.calls <= self.failing:
                raise self.error
            return "ok"

        self.tool = execute


class TestSandboxCircuitBreaker:
    async def test_repeated_sandbox_failures_stop_the_run_with_a_notice(
        self, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        failures, notifier, sandbox = SandboxFailures(redis, keys), RecordingNotifier(), FlakySandbox(failing=10)
        script = Script()
        for _ in range(5):
            script.tool_call("execute", command="make")
        async with ScriptedModelServer(script) as server:
            middleware = [
                ToolErrorsAsMessages(thread_id),
                SandboxCircuitBreaker(failures, thread_id, notifier=notifier, threshold=3),
            ]
            agent = create_agent(chat_model(server), [sandbox.tool], middleware=middleware)
            result = await agent.ainvoke({"messages": [HumanMessage("build it")]})

        assert sandbox.calls == 3
        assert len(server.requests) == 3
        assert await failures.count(thread_id) == 3
        assert stop_reason(result["messages"]) is StopReason.SANDBOX_FAILURES
        assert len(notifier.notices) == 1
        assert "sandbox failed 3 times" in notifier.notices[0]
        errors = [m for m in result["messages"] if isinstance(m, ToolMessage)]
        assert all(m.status == "error" and "SandboxUnavailable" in m.text for m in errors)

    async def test_a_thread_already_over_the_threshold_makes_no_model_call(
        self, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        failures, notifier = SandboxFailures(redis, keys), RecordingNotifier()
        for _ in range(3):
            await failures.record(thread_id)
        async with ScriptedModelServer(Script().reply("unreachable")) as server:
            middleware = [SandboxCircuitBreaker(failures, thread_id, notifier=notifier, threshold=3)]
            agent = create_agent(chat_model(server), [], middleware=middleware)
            result = await agent.ainvoke({"messages": [HumanMessage("build it")]})

        assert server.requests == []
        assert stop_reason(result["messages"]) is StopReason.SANDBOX_FAILURES
        assert len(notifier.notices) == 1

    async def test_a_working_sandbox_resets_the_count(self, redis: Redis, keys: Keys, thread_id: str) -> None:
        failures, sandbox = SandboxFailures(redis, keys), FlakySandbox(failing=2)
        script = Script().tool_call("execute", command="a").tool_call("execute", command="b")
        script.tool_call("execute", command="c").reply("built")
        async with ScriptedModelServer(script) as server:
            middleware = [ToolErrorsAsMessages(thread_id), SandboxCircuitBreaker(failures, thread_id, threshold=3)]
            agent = create_agent(chat_model(server), [sandbox.tool], middleware=middleware)
            result = await agent.ainvoke({"messages": [HumanMessage("build it")]})

        assert result["messages"][-1].text == "built"
        assert await failures.count(thread_id) == 0

    async def test_other_tool_errors_do_not_count(self, redis: Redis, keys: Keys, thread_id: str) -> None:
        failures, sandbox = SandboxFailures(redis, keys), FlakySandbox(failing=4, error=ValueError("bad flag"))
        script = Script()
        for _ in range(4):
            script.tool_call("execute", command="make --bad")
        script.reply("gave up on the flag")
        async with ScriptedModelServer(script) as server:
            middleware = [ToolErrorsAsMessages(thread_id), SandboxCircuitBreaker(failures, thread_id, threshold=3)]
            agent = create_agent(chat_model(server), [sandbox.tool], middleware=middleware)
            result = await agent.ainvoke({"messages": [HumanMessage("build it")]})

        assert result["messages"][-1].text == "gave up on the flag"
        assert await failures.count(thread_id) == 0
