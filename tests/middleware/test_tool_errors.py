from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import interrupt
from langgraph_checkpoint_plainredis import AsyncRedisSaver

from drydock.effects import bound_call, current_call
from drydock.effects.calls import call_position
from drydock.middleware.tool_errors import ToolErrorsAsMessages
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import CheckpointLoss, chat_model, run_config


@tool
async def write_report(path: str) -> str:
    """Write the report."""
    raise OSError(28, "No space left on device")


@tool
async def ask_a_human(question: str) -> str:
    """Ask a person and wait for the answer."""
    return str(interrupt(question))


@tool
async def which_call(note: str) -> str:
    """Say which tool call this is."""
    return current_call()


class TestToolErrorsAsMessages:
    async def test_an_exception_becomes_an_error_message_and_the_run_goes_on(self) -> None:
        script = Script().tool_call("write_report", path="/tmp/r").reply("I could not write it: the disk is full")
        async with ScriptedModelServer(script) as server:
            agent = create_agent(chat_model(server), [write_report], middleware=[ToolErrorsAsMessages("t")])
            result = await agent.ainvoke({"messages": [HumanMessage("write the report")]})

        answer = next(m for m in result["messages"] if isinstance(m, ToolMessage))
        assert answer.status == "error"
        assert "write_report" in answer.text
        assert "OSError" in answer.text
        assert "No space left on device" in answer.text
        assert any("No space left on device" in text for text in server.requests[1].texts("tool"))
        assert result["messages"][-1].text == "I could not write it: the disk is full"

    async def test_without_it_the_exception_ends_the_run(self) -> None:
        script = Script().tool_call("write_report", path="/tmp/r").reply("unreachable")
        async with ScriptedModelServer(script) as server:
            agent = create_agent(chat_model(server), [write_report])
            with pytest.raises(OSError, match="No space left"):
                await agent.ainvoke({"messages": [HumanMessage("write the report")]})

    async def test_an_interrupt_is_not_an_error(self, checkpointer: AsyncRedisSaver, thread_id: str) -> None:
        script = Script().tool_call("ask_a_human", question="which branch?").reply("done")
        async with ScriptedModelServer(script) as server:
            agent = create_agent(
                chat_model(server), [ask_a_human], middleware=[ToolErrorsAsMessages("t")], checkpointer=checkpointer
            )
            result = await agent.ainvoke({"messages": [HumanMessage("ask")]}, run_config(thread_id))

        assert result["__interrupt__"][0].value == "which branch?"
        assert not any(isinstance(m, ToolMessage) for m in result["messages"])


class TestBindsTheToolCall:
    async def test_a_tool_sees_its_step_and_index_for_the_effects_ledger(self) -> None:
        script = (
            Script()
            .tool_calls(("which_call", {"note": "a"}), ("which_call", {"note": "b"}))
            .tool_call("which_call", note="c")
            .reply("done")
        )
        async with ScriptedModelServer(script) as server:
            agent = create_agent(chat_model(server), [which_call], middleware=[ToolErrorsAsMessages("t")])
            result = await agent.ainvoke({"messages": [HumanMessage("go")]})

        answers = [m.text for m in result["messages"] if isinstance(m, ToolMessage)]
        assert answers == ["step-2.0", "step-2.1", "step-4.0"]

    async def test_a_model_step_asked_again_gives_its_calls_the_same_positions(
        self, checkpointer: AsyncRedisSaver, thread_id: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        script = Script().tool_call("which_call", note="x").reply("done").tool_call("which_call", note="x").reply("ok")
        loss = CheckpointLoss(monkeypatch, checkpointer, step=0)
        async with ScriptedModelServer(script) as server:
            agent = create_agent(
                chat_model(server), [which_call], middleware=[ToolErrorsAsMessages("t")], checkpointer=checkpointer
            )
            first = await agent.ainvoke({"messages": [HumanMessage("go")]}, run_config(thread_id))
            loss.restore()
            again = await agent.ainvoke(None, run_config(thread_id))

        first_call, second_call = (
            next(m for m in run["messages"] if isinstance(m, ToolMessage)) for run in (first, again)
        )
        assert first_call.tool_call_id != second_call.tool_call_id
        assert first_call.text == second_call.text == "step-2.0"

    async def test_a_call_inside_another_call_is_placed_under_it(self) -> None:
        outer = call_position(7, [AIMessage("", tool_calls=[{"name": "task", "args": {}, "id": "c1"}])], "c1")
        assert outer == "step-7.0"
        with bound_call(outer), bound_call("step-2.1"):
            assert current_call() == "step-7.0/step-2.1"
        assert current_call().startswith("direct-")
