from __future__ import annotations

from typing import Any, cast

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph_checkpoint_plainredis import AsyncRedisSaver

from drydock.budgets import LimitKind, Reached
from drydock.middleware.model_call_limit import ModelCallLimit, fresh_count
from drydock.middleware.outcome import BUDGET_KEY, StopReason, stop_reason
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import chat_model, run_config


@tool
async def execute(command: str) -> str:
    """Run a shell command."""
    return "ok"


class TestModelCallLimit:
    async def test_the_run_ends_gracefully_at_the_limit(self) -> None:
        script = Script().tool_call("execute", command="a").tool_call("execute", command="b").reply("never asked")
        async with ScriptedModelServer(script) as server:
            agent = create_agent(chat_model(server), [execute], middleware=[ModelCallLimit(2)])
            result = await agent.ainvoke({"messages": [HumanMessage("work")]})

        assert len(server.requests) == 2
        assert script.remaining == 1
        assert stop_reason(result["messages"]) is StopReason.STEP_LIMIT
        last = result["messages"][-1]
        assert isinstance(last, AIMessage)
        assert "step limit" in last.text

    async def test_a_run_below_the_limit_is_untouched(self) -> None:
        script = Script().tool_call("execute", command="a").reply("done")
        async with ScriptedModelServer(script) as server:
            agent = create_agent(chat_model(server), [execute], middleware=[ModelCallLimit(2)])
            result = await agent.ainvoke({"messages": [HumanMessage("work")]})

        assert result["messages"][-1].text == "done"
        assert stop_reason(result["messages"]) is None

    async def test_each_run_of_a_thread_gets_the_whole_budget(
        self, checkpointer: AsyncRedisSaver, thread_id: str
    ) -> None:
        script = (
            Script()
            .tool_call("execute", command="a")
            .tool_call("execute", command="b")
            .tool_call("execute", command="c")
            .reply("finished")
        )
        async with ScriptedModelServer(script) as server:

            async def run(text: str) -> dict[str, Any]:
                # As the worker runs a turn: middleware of its own, and the fresh count in its input.
                agent = create_agent(
                    chat_model(server), [execute], middleware=[ModelCallLimit(2)], checkpointer=checkpointer
                )
                turn = {"messages": [HumanMessage(text)], **fresh_count()}
                return await agent.ainvoke(cast(Any, turn), run_config(thread_id))

            first = await run("work")
            second = await run("go on")

        assert stop_reason(first["messages"]) is StopReason.STEP_LIMIT
        assert second["messages"][-1].text == "finished"
        assert len(server.requests) == 4

    async def test_a_resumed_turn_keeps_counting_where_it_was(
        self, checkpointer: AsyncRedisSaver, thread_id: str
    ) -> None:
        script = Script().tool_call("execute", command="a").tool_call("execute", command="b").reply("never asked")
        async with ScriptedModelServer(script) as server:

            def agent(*, interrupted: bool = False) -> Any:
                return create_agent(
                    chat_model(server),
                    [execute],
                    middleware=[ModelCallLimit(2)],
                    checkpointer=checkpointer,
                    interrupt_after=["tools"] if interrupted else None,
                )

            turn = {"messages": [HumanMessage("work")], **fresh_count()}
            # A run that died after its first step: the next run resumes (no input) on middleware of its own.
            await agent(interrupted=True).ainvoke(cast(Any, turn), run_config(thread_id))
            resumed = await agent().ainvoke(None, run_config(thread_id))

        assert len(server.requests) == 2
        assert stop_reason(resumed["messages"]) is StopReason.STEP_LIMIT
        assert "model_calls" not in resumed

    def test_a_limit_below_one_is_rejected(self) -> None:
        with pytest.raises(ValueError, match="at least 1"):
            ModelCallLimit(0)


class FixedGuard:
    """A spend guard that reports ``reached`` from the ``after``-th check on."""

    def __init__(self, reached: Reached, after: int) -> None:
        self.reached_at = reached
        self.after = after
        self.checks = 0

    async def reached(self) -> Reached | None:
        self.checks += 1
        return self.reached_at if self.checks >= self.after else None


class TestSpendLimit:
    async def test_the_run_ends_at_a_spend_limit_with_what_was_spent(self) -> None:
        script = Script().tool_call("execute", command="a").reply("never asked")
        limit = Reached(LimitKind.RUN, limit_usd=0.5, spent_usd=0.62)
        guard = FixedGuard(limit, after=2)
        async with ScriptedModelServer(script) as server:
            agent = create_agent(chat_model(server), [execute], middleware=[ModelCallLimit(10, spend=guard)])
            result = await agent.ainvoke({"messages": [HumanMessage("work")]})

        assert len(server.requests) == 1
        assert guard.checks == 2
        assert stop_reason(result["messages"]) is StopReason.BUDGET
        last = result["messages"][-1]
        assert last.text == "I stopped at this run's spend limit of $0.50: I spent $0.62 in this run."
        assert Reached.from_json(last.response_metadata[BUDGET_KEY]) == limit

    async def test_the_call_limit_is_checked_first(self) -> None:
        script = Script().tool_call("execute", command="a").reply("never asked")
        guard = FixedGuard(Reached(LimitKind.RUN, limit_usd=0.5, spent_usd=0.62), after=2)
        async with ScriptedModelServer(script) as server:
            agent = create_agent(chat_model(server), [execute], middleware=[ModelCallLimit(1, spend=guard)])
            result = await agent.ainvoke({"messages": [HumanMessage("work")]})
        assert len(server.requests) == 1
        assert guard.checks == 1
        assert stop_reason(result["messages"]) is StopReason.STEP_LIMIT
