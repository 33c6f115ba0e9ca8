from __future__ import annotations

import os
import re
from typing import Any

import openai
import pytest
from langchain_core.messages import AIMessageChunk, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, SecretStr

import drydock.chat_openai as module
from drydock.config import ConfigError, ModelSettings, load_settings
from drydock.models import (
    BUILTIN_MODELS,
    Layer,
    ModelChoice,
    ModelError,
    ModelNotConfigured,
    Models,
    ReasoningEffort,
)
from tests.fakes.openai_server import Script, ScriptedModelServer

E = ReasoningEffort


def _models(**settings: object) -> Models:
    return Models(ModelSettings(api_key=SecretStr("k"), **settings))  # type: ignore[arg-type]


class TestCatalog:
    def test_reasoning_models_default_to_medium_and_others_to_no_effort(self) -> None:
        for spec in BUILTIN_MODELS:
            assert spec.default_effort == (E.MEDIUM if spec.reasoning else None)

    def test_an_unknown_model_names_the_supported_ones(self) -> None:
        with pytest.raises(ModelError, match=r"unknown model 'gpt-9'; supported: .*gpt-5\.1"):
            _models().resolve(ModelChoice(model="gpt-9"))

    @pytest.mark.parametrize(
        ("model", "effort", "problem"),
        [
            ("gpt-4.1", E.HIGH, "takes no reasoning effort"),
            ("gpt-5", E.NONE, "takes reasoning effort minimal, low, medium, high; not 'none'"),
            ("gpt-5.1", E.XHIGH, "not 'xhigh'"),
            ("o3", E.MINIMAL, "not 'minimal'"),
        ],
    )
    def test_an_effort_the_model_does_not_take_is_rejected(self, model: str, effort: E, problem: str) -> None:
        with pytest.raises(ModelError, match=problem):
            _models().resolve(ModelChoice(model=model, effort=effort))

    @pytest.mark.parametrize(("model", "effort"), [("gpt-5.1", E.NONE), ("gpt-5.2", E.XHIGH), ("gpt-5", E.MINIMAL)])
    def test_an_effort_the_model_takes_is_kept(self, model: str, effort: E) -> None:
        resolved = _models().resolve(ModelChoice(model=model, effort=effort))
        assert (resolved.id, resolved.effort) == (model, effort)

    def test_extra_models_join_the_catalog_with_their_efforts(self) -> None:
        models = _models(extra_models={"qwen3-coder": [], "deepseek-r1": ["low", "high"]})
        assert models.resolve(ModelChoice(model="qwen3-coder")).effort is None
        assert models.resolve(ModelChoice(model="deepseek-r1")).effort is E.LOW
        with pytest.raises(ModelError, match="takes no reasoning effort"):
            models.resolve(ModelChoice(model="qwen3-coder", effort=E.LOW))

    def test_an_extra_model_with_an_unknown_effort_is_rejected_at_start_up(self) -> None:
        with pytest.raises(ModelError, match=r"DRYDOCK_MODELS_EXTRA_MODELS\['m'\]: 'huge' is not a reasoning effort"):
            _models(extra_models={"m": ["huge"]})


class TestPeoplesChoices:
    """``ModelCatalog.choice``: what a message's ``model=… effort=…`` is checked with."""

    def test_a_valid_choice_is_kept(self) -> None:
        catalog = _models().catalog
        assert catalog.choice("o3", "high") == ModelChoice(model="o3", effort=E.HIGH)
        assert catalog.choice(None, "low") == ModelChoice(effort=E.LOW)
        assert catalog.choice("gpt-4.1", None) == ModelChoice(model="gpt-4.1")

    @pytest.mark.parametrize(
        ("model", "effort", "problem"),
        [
            ("gpt-9", None, r"unknown model 'gpt-9'; supported: .*gpt-4\.1.*o4-mini"),
            ("gpt-4.1", "high", "takes no reasoning effort"),
            ("o3", "minimal", "takes reasoning effort low, medium, high; not 'minimal'"),
            (None, "turbo", r"effort: 'turbo' is not a reasoning effort \(none, minimal, low, medium, high, xhigh\)"),
        ],
    )
    def test_an_invalid_choice_names_the_valid_ones(self, model: str | None, effort: str | None, problem: str) -> None:
        with pytest.raises(ModelError, match=problem):
            _models().catalog.choice(model, effort)


class TestInstallationSettings:
    def test_an_unknown_default_is_rejected_at_start_up(self) -> None:
        with pytest.raises(ModelError, match="DRYDOCK_MODELS_DEFAULT: unknown model 'gpt-9'"):
            _models(default="gpt-9")

    def test_a_default_effort_the_default_does_not_take_is_rejected(self) -> None:
        with pytest.raises(
            ModelError, match=re.escape("DRYDOCK_MODELS_DEFAULT: model 'gpt-4.1' takes no reasoning effort")
        ):
            _models(default="gpt-4.1", default_effort="high")

    def test_an_unknown_effort_name_is_rejected(self) -> None:
        with pytest.raises(ModelError, match="DRYDOCK_MODELS_DEFAULT_EFFORT: 'max' is not a reasoning effort"):
            _models(default_effort="max")

    def test_an_unknown_fallback_is_rejected(self) -> None:
        with pytest.raises(ModelError, match="DRYDOCK_MODELS_FALLBACK: unknown model"):
            _models(fallback="gpt-9")

    def test_the_environment_configures_the_endpoint_and_extra_models(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in list(os.environ):
            if name.startswith("DRYDOCK_"):
                monkeypatch.delenv(name)
        monkeypatch.setenv("DRYDOCK_MODELS_BASE_URL", "http://llm.internal:8000/v1/")
        monkeypatch.setenv("DRYDOCK_MODELS_EXTRA_MODELS", '{"qwen3-coder": []}')
        monkeypatch.setenv("DRYDOCK_MODELS_DEFAULT", "qwen3-coder")
        monkeypatch.setenv("DRYDOCK_MODELS_MAX_RETRIES", "5")
        models = Models(load_settings().models)
        assert models.default.id == "qwen3-coder"
        assert models.settings.base_url == "http://llm.internal:8000/v1"
        assert models.provider_arguments(models.default)["max_retries"] == 5

    def test_a_base_url_must_be_http(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("DRYDOCK_MODELS_BASE_URL", "llm.internal:8000")
        with pytest.raises(ConfigError, match="DRYDOCK_MODELS_BASE_URL"):
            load_settings()


class TestChoices:
    def test_untyped_input_becomes_a_choice(self) -> None:
        assert ModelChoice.of("o3", "high") == ModelChoice(model="o3", effort=E.HIGH)
        assert ModelChoice.of("", "") == ModelChoice()

    def test_an_unknown_effort_name_is_a_model_error_naming_its_source(self) -> None:
        with pytest.raises(ModelError, match="the thread's settings: 'ultra' is not a reasoning effort"):
            ModelChoice.of("o3", "ultra", where="the thread's settings")


class TestResolution:
    def test_nothing_chosen_is_the_installation_default(self) -> None:
        resolved = _models(default="gpt-5", default_effort="low").resolve()
        assert (resolved.id, resolved.effort, resolved.source) == ("gpt-5", E.LOW, Layer.INSTALLATION)

    def test_the_thread_wins_over_the_user_and_the_team(self) -> None:
        resolved = _models().resolve(
            ModelChoice(model="o3"), ModelChoice(model="gpt-5-mini"), ModelChoice(model="gpt-4.1")
        )
        assert (resolved.id, resolved.source) == ("o3", Layer.THREAD)

    def test_the_user_wins_over_the_team(self) -> None:
        resolved = _models().resolve(None, ModelChoice(model="gpt-5-mini"), ModelChoice(model="gpt-4.1"))
        assert (resolved.id, resolved.source) == ("gpt-5-mini", Layer.USER)

    def test_the_team_wins_over_the_installation(self) -> None:
        resolved = _models().resolve(ModelChoice(), ModelChoice(), ModelChoice(model="gpt-5.2", effort=E.XHIGH))
        assert (resolved.id, resolved.effort, resolved.source) == ("gpt-5.2", E.XHIGH, Layer.TEAM)

    def test_an_effort_alone_applies_to_the_model_a_lower_layer_chose(self) -> None:
        resolved = _models().resolve(ModelChoice(effort=E.HIGH), None, ModelChoice(model="gpt-5"))
        assert (resolved.id, resolved.effort) == ("gpt-5", E.HIGH)

    def test_an_explicit_effort_the_chosen_model_does_not_take_is_an_error(self) -> None:
        with pytest.raises(ModelError, match=re.escape("'gpt-4.1' takes no reasoning effort")):
            _models().resolve(ModelChoice(effort=E.HIGH), None, ModelChoice(model="gpt-4.1"))

    def test_a_lower_layers_effort_for_another_model_is_dropped(self) -> None:
        resolved = _models().resolve(ModelChoice(model="gpt-4.1"), ModelChoice(effort=E.HIGH))
        assert (resolved.id, resolved.effort) == ("gpt-4.1", None)

    def test_a_lower_layers_effort_the_model_takes_applies(self) -> None:
        resolved = _models().resolve(ModelChoice(model="o3"), ModelChoice(effort=E.HIGH))
        assert (resolved.id, resolved.effort) == ("o3", E.HIGH)

    def test_the_installation_effort_belongs_to_the_default_model_only(self) -> None:
        models = _models(default="gpt-5.1", default_effort="none")
        assert models.resolve(ModelChoice(model="gpt-5")).effort is E.MEDIUM
        assert models.resolve(ModelChoice(model="gpt-5.1")).effort is E.NONE


class TestFallbackSelection:
    def test_no_fallback_configured(self) -> None:
        models = _models()
        assert models.fallback_for(models.resolve()) is None

    def test_a_fallback_equal_to_the_runs_model_is_not_used(self) -> None:
        models = _models(fallback="gpt-5-mini")
        assert models.fallback_for(models.resolve(ModelChoice(model="gpt-5-mini"))) is None

    def test_a_distinct_fallback_is_used(self) -> None:
        models = _models(fallback="gpt-5-mini", fallback_effort="low")
        chosen = models.fallback_for(models.resolve())
        assert chosen is not None
        assert (chosen.id, chosen.effort) == ("gpt-5-mini", E.LOW)


class TestChatModel:
    def test_no_endpoint_configured_is_a_clear_error(self) -> None:
        models = Models(ModelSettings())
        assert not models.configured
        with pytest.raises(ModelNotConfigured, match="DRYDOCK_MODELS_API_KEY"):
            models.chat_model(models.default)

    def test_runs_share_one_client_per_model_and_effort(self) -> None:
        models = _models(default="gpt-5")
        default = models.chat_model(models.default)
        assert models.chat_model(models.resolve()) is default
        high = models.chat_model(models.resolve(ModelChoice(effort=E.HIGH)))
        other = models.chat_model(models.resolve(ModelChoice(model="gpt-5-mini")))
        assert len({id(default), id(high), id(other)}) == 3
        assert (high.model_name, high.reasoning_effort) == ("gpt-5", "high")
        assert (other.model_name, other.reasoning_effort) == ("gpt-5-mini", "medium")

    async def test_requests_carry_the_model_its_effort_and_the_key(self) -> None:
        async with ScriptedModelServer(Script().reply("hello"), api_key="sk-test") as server:
            models = Models(ModelSettings(base_url=server.base_url, api_key=SecretStr("sk-test"), max_retries=0))
            reply = await models.chat_model(models.resolve(ModelChoice(effort=E.HIGH))).ainvoke("hi")

        (request,) = server.requests
        assert reply.text == "hello"
        assert request.path == "/v1/chat/completions"
        assert request.headers["authorization"] == "Bearer sk-test"
        assert (request.model, request.body["reasoning_effort"]) == ("gpt-5.1", "high")

    async def test_a_model_without_reasoning_gets_no_effort_argument(self) -> None:
        async with ScriptedModelServer(Script().reply("hello")) as server:
            models = Models(ModelSettings(base_url=server.base_url, api_key=SecretStr("k"), default="gpt-4.1"))
            await models.chat_model(models.default).ainvoke("hi")

        assert "reasoning_effort" not in server.requests[0].body

    async def test_a_base_url_without_a_key_sends_a_placeholder(self) -> None:
        async with ScriptedModelServer(Script().reply("hello")) as server:
            models = Models(ModelSettings(base_url=server.base_url))
            await models.chat_model(models.default).ainvoke("hi")

        assert server.requests[0].headers["authorization"] == "Bearer not-needed"

    async def test_server_errors_are_retried(self) -> None:
        script = Script().fail(500, retry_after=0.01).fail(429, retry_after=0.01).reply("third time lucky")
        async with ScriptedModelServer(script) as server:
            models = Models(ModelSettings(base_url=server.base_url, api_key=SecretStr("k"), max_retries=2))
            reply = await models.chat_model(models.default).ainvoke("hi")

        assert reply.text == "third time lucky"
        assert len(server.requests) == 3

    async def test_retries_are_bounded(self) -> None:
        script = Script().fail(503, retry_after=0.01).fail(503, retry_after=0.01).reply("unreachable")
        async with ScriptedModelServer(script) as server:
            models = Models(ModelSettings(base_url=server.base_url, api_key=SecretStr("k"), max_retries=1))
            with pytest.raises(openai.InternalServerError, match="overloaded"):
                await models.chat_model(models.default).ainvoke("hi")

        assert len(server.requests) == 2

    async def test_a_bad_request_is_not_retried(self) -> None:
        async with ScriptedModelServer(Script().fail(400, "bad tool schema").reply("unreachable")) as server:
            models = Models(ModelSettings(base_url=server.base_url, api_key=SecretStr("k"), max_retries=3))
            with pytest.raises(openai.BadRequestError, match="bad tool schema"):
                await models.chat_model(models.default).ainvoke("hi")

        assert len(server.requests) == 1

    async def test_a_slow_answer_times_out(self) -> None:
        async with ScriptedModelServer(Script().reply("too late", latency=5)) as server:
            models = Models(ModelSettings(base_url=server.base_url, api_key=SecretStr("k"), timeout=0.3, max_retries=0))
            with pytest.raises(openai.APITimeoutError):
                await models.chat_model(models.default).ainvoke("hi")

    async def test_streaming_yields_chunks_and_usage(self) -> None:
        async with ScriptedModelServer(Script().reply("a streamed answer that spans several chunks")) as server:
            models = Models(ModelSettings(base_url=server.base_url, api_key=SecretStr("k")))
            chunks = [chunk async for chunk in models.chat_model(models.default).astream("hi")]

        assert server.requests[0].stream
        assert server.requests[0].body["stream_options"] == {"include_usage": True}
        assert len(chunks) > 3
        whole = chunks[0]
        for chunk in chunks[1:]:
            whole = whole + chunk
        assert isinstance(whole, AIMessageChunk)
        assert whole.text == "a streamed answer that spans several chunks"
        assert whole.usage_metadata is not None
        assert whole.usage_metadata["output_tokens"] > 0


class TestToolBinding:
    async def test_bound_tools_reach_the_endpoint_as_langchain_converts_them(self) -> None:
        class Query(BaseModel):
            text: str

        async def search(text: str) -> str:
            return text

        tool = StructuredTool.from_function(coroutine=search, name="search", description="Search.", args_schema=Query)
        tool.extras = {"defer_loading": True}
        async with ScriptedModelServer(Script().reply("hello")) as server:
            models = Models(ModelSettings(base_url=server.base_url, api_key=SecretStr("k"), max_retries=0))
            await models.chat_model(models.default).bind_tools([tool]).ainvoke("hi")

        (sent,) = server.requests[0].body["tools"]
        assert sent == {**convert_to_openai_tool(tool), "defer_loading": True}

    def test_a_tool_schema_is_converted_once_for_every_run(self, monkeypatch: pytest.MonkeyPatch) -> None:
        class Path(BaseModel):
            path: str

        async def read(path: str) -> str:
            return path

        conversions: list[str] = []

        def counting(tool: StructuredTool, *, strict: bool | None = None) -> dict[str, object]:
            conversions.append(tool.name)
            return convert_to_openai_tool(tool, strict=strict)

        monkeypatch.setattr(module, "convert_to_openai_tool", counting)
        models = _models()
        for _ in range(3):
            # Each run builds its tools anew, over the same argument schema.
            tool = StructuredTool.from_function(coroutine=read, name="read", description="Read.", args_schema=Path)
            models.chat_model(models.default).bind_tools([tool])
        renamed = StructuredTool.from_function(coroutine=read, name="read2", description="Read.", args_schema=Path)
        models.chat_model(models.default).bind_tools([renamed])

        assert conversions == ["read", "read2"]


class TestSystemMessage:
    async def _sent(self, *messages: BaseMessage) -> list[dict[str, Any]]:
        async with ScriptedModelServer(Script().reply("ok")) as server:
            models = Models(ModelSettings(base_url=server.base_url, api_key=SecretStr("k")))
            await models.chat_model(models.default).ainvoke(list(messages))
        return server.requests[0].messages

    async def test_plain_text_blocks_are_sent_as_the_string_they_spell(self) -> None:
        system = SystemMessage(
            content_blocks=[{"type": "text", "text": "You are the coder."}, {"type": "text", "text": "\n\nTodos."}]
        )

        sent, _ = await self._sent(system, HumanMessage("hi"))

        assert sent == {"role": "system", "content": "You are the coder.\n\nTodos."}

    async def test_a_block_with_more_than_its_text_keeps_the_list(self) -> None:
        breakpoint_block: Any = {"type": "text", "text": "\n\nCached.", "extras": {"prompt_cache_breakpoint": True}}
        system = SystemMessage(content_blocks=[{"type": "text", "text": "You are the coder."}, breakpoint_block])

        sent, _ = await self._sent(system, HumanMessage("hi"))

        assert isinstance(sent["content"], list)
        assert [block["text"] for block in sent["content"]] == ["You are the coder.", "\n\nCached."]

    async def test_other_messages_are_sent_as_given(self) -> None:
        human = HumanMessage(content_blocks=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])

        system, user = await self._sent(SystemMessage("plain"), human)

        assert system == {"role": "system", "content": "plain"}
        assert user["content"] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
