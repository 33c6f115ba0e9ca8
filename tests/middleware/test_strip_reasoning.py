from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph_checkpoint_plainredis import AsyncRedisSaver

from drydock.middleware.strip_reasoning import StripMalformedReasoning
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import chat_model, run_config

RESPONSES_REASONING = {"type": "reasoning", "id": "rs_abc123", "summary": [{"type": "summary_text", "text": "plan"}]}
UNSIGNED_THINKING = {"type": "thinking", "thinking": "let me see"}
REDACTED_THINKING = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"}
REDACTED_WITHOUT_DATA = {"type": "redacted_thinking"}
TEXT = {"type": "text", "text": "I looked at the failing test."}


def _history(*content: dict[str, Any]) -> list[Any]:
    return [HumanMessage("what failed?"), AIMessage(content=list(content)), HumanMessage("fix it")]


class TestStripMalformedReasoning:
    async def test_chat_completions_gets_no_reasoning_blocks_but_keeps_the_text(
        self, checkpointer: AsyncRedisSaver, thread_id: str
    ) -> None:
        history = _history(RESPONSES_REASONING, UNSIGNED_THINKING, REDACTED_THINKING, TEXT)
        async with ScriptedModelServer(Script().reply("fixed")) as server:
            agent = create_agent(
                chat_model(server), [], middleware=[StripMalformedReasoning()], checkpointer=checkpointer
            )
            result = await agent.ainvoke({"messages": history}, run_config(thread_id))

        (sent,) = [m for m in server.requests[0].messages if m["role"] == "assistant"]
        assert sent["content"] == [TEXT]
        kept = result["messages"][1]
        assert isinstance(kept, AIMessage)
        assert kept.content == [RESPONSES_REASONING, UNSIGNED_THINKING, REDACTED_THINKING, TEXT]

    async def test_a_message_of_only_reasoning_is_sent_empty(self) -> None:
        async with ScriptedModelServer(Script().reply("fixed")) as server:
            agent = create_agent(chat_model(server), [], middleware=[StripMalformedReasoning()])
            await agent.ainvoke({"messages": _history(REDACTED_THINKING)})

        (sent,) = [m for m in server.requests[0].messages if m["role"] == "assistant"]
        assert sent["content"] == ""

    async def test_an_accepted_family_keeps_well_formed_blocks_only(self) -> None:
        history = _history(REDACTED_THINKING, REDACTED_WITHOUT_DATA, TEXT)
        accepted = frozenset({"redacted_thinking"})
        async with ScriptedModelServer(Script().reply("fixed")) as server:
            agent = create_agent(chat_model(server), [], middleware=[StripMalformedReasoning(accepted=accepted)])
            await agent.ainvoke({"messages": history})

        (sent,) = [m for m in server.requests[0].messages if m["role"] == "assistant"]
        assert sent["content"] == [REDACTED_THINKING, TEXT]

    async def test_without_it_anthropic_redacted_thinking_reaches_chat_completions(self) -> None:
        async with ScriptedModelServer(Script().reply("fixed")) as server:
            agent = create_agent(chat_model(server), [])
            await agent.ainvoke({"messages": _history(REDACTED_WITHOUT_DATA, TEXT)})

        (sent,) = [m for m in server.requests[0].messages if m["role"] == "assistant"]
        assert REDACTED_WITHOUT_DATA in sent["content"]
