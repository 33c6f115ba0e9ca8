from __future__ import annotations

from typing import Any

import openai
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelFallbackMiddleware
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import SecretStr

from drydock.config import ModelSettings
from drydock.middleware.model_fallback import model_fallback
from drydock.middleware.strip_reasoning import StripMalformedReasoning
from drydock.models import Models
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import chat_model

HISTORY: list[Any] = [
    HumanMessage("earlier question"),
    AIMessage(content=[{"type": "redacted_thinking", "data": "opaque"}, {"type": "text", "text": "earlier answer"}]),
    HumanMessage("fix the build"),
]


class TestModelFallback:
    def test_no_fallback_model_means_no_middleware(self) -> None:
        assert model_fallback(None) is None

    async def test_a_failing_primary_is_answered_by_the_fallback(self) -> None:
        scripts = {"gpt-5.1": Script().fail(503), "gpt-5-mini": Script().reply("fixed by the fallback")}
        async with ScriptedModelServer(scripts=scripts) as server:
            fallback = model_fallback(chat_model(server, "gpt-5-mini"))
            assert isinstance(fallback, ModelFallbackMiddleware)
            agent = create_agent(chat_model(server, "gpt-5.1"), [], middleware=[fallback, StripMalformedReasoning()])
            result = await agent.ainvoke({"messages": HISTORY})

        assert result["messages"][-1].text == "fixed by the fallback"
        assert [request.model for request in server.requests] == ["gpt-5.1", "gpt-5-mini"]
        for request in server.requests:
            assert request.texts("assistant") == ["earlier answer"]
            assert "redacted_thinking" not in str(request.messages)

    async def test_the_configured_fallback_is_skipped_when_it_is_the_runs_model(self) -> None:
        async with ScriptedModelServer(scripts={"gpt-5.1": Script().fail(503)}) as server:
            models = Models(
                ModelSettings(
                    base_url=server.base_url,
                    api_key=SecretStr("k"),
                    default="gpt-5.1",
                    fallback="gpt-5.1",
                    max_retries=0,
                )
            )
            primary = models.resolve()
            chosen = models.fallback_for(primary)
            fallback = model_fallback(models.chat_model(chosen) if chosen is not None else None)
            middleware = [m for m in [fallback] if m is not None]
            agent = create_agent(models.chat_model(primary), [], middleware=middleware)
            with pytest.raises(openai.InternalServerError):
                await agent.ainvoke({"messages": [HumanMessage("fix the build")]})

        assert fallback is None
        assert [request.model for request in server.requests] == ["gpt-5.1"]
