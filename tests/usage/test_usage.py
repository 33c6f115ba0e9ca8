from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from redis.asyncio import Redis

from drydock.config import ModelPriceSetting, ModelSettings, Settings
from drydock.infra.redis import Keys
from drydock.middleware.model_call_limit import ModelCallLimit, StepBudget
from drydock.model_catalog import BUILTIN_PRICES, Price, PriceTable
from drydock.telemetry import REGISTRY
from drydock.usage import CallUsage, Dimension, UsageLedger, UsageRecorder, UsageScope
from drydock.usage.recorder import METADATA_KEY
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import chat_model


@tool
async def execute(command: str) -> str:
    """Run a shell command."""
    return "ok"


def _scope(repository: str | None = "Acme/App") -> UsageScope:
    return UsageScope(
        run_id=uuid.uuid4().hex, thread_id=str(uuid.uuid4()), role="coder", user_id="ada", repository=repository
    )


class TestPrices:
    def test_a_dated_snapshot_gets_its_models_price(self) -> None:
        table = PriceTable(BUILTIN_PRICES)
        assert table.price("gpt-5-2025-08-07") == BUILTIN_PRICES["gpt-5"]

    def test_the_model_that_answered_is_counted_as_the_catalog_names_it(self) -> None:
        reply = AIMessage(
            content="",
            response_metadata={"model_name": "gpt-5-mini-2025-08-07"},
            usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
        )
        call = CallUsage.of(reply, "gpt-5", PriceTable(BUILTIN_PRICES))
        assert call is not None
        assert call.model == "gpt-5-mini"
        assert call.cost_usd == pytest.approx(BUILTIN_PRICES["gpt-5-mini"].cost(10, 0, 5))

    def test_an_unknown_model_has_no_price(self) -> None:
        assert PriceTable(BUILTIN_PRICES).price("qwen3-coder") is None

    def test_settings_add_and_replace_prices(self) -> None:
        settings = Settings(
            models=ModelSettings(
                prices={
                    "qwen3-coder": ModelPriceSetting(input=0.5, output=2.0),
                    "gpt-5": ModelPriceSetting(input=1.0, cached_input=0.1, output=8.0),
                }
            )
        )
        table = PriceTable.from_settings(settings)
        assert table.price("qwen3-coder") == Price(0.5, 0.5, 2.0)
        assert table.price("gpt-5") == Price(1.0, 0.1, 8.0)

    def test_cached_input_is_priced_apart_and_reasoning_as_output(self) -> None:
        # 1,000 input of which 400 cached, 500 output: 600 * 1.25 + 400 * 0.125 + 500 * 10 per million.
        assert Price(1.25, 0.125, 10.0).cost(1_000, 400, 500) == pytest.approx(0.0058)

    def test_a_bad_price_setting_is_refused(self) -> None:
        with pytest.raises(ValueError, match="greater than or equal to 0"):
            ModelPriceSetting(input=-1, output=1)


class TestRecordingAtTheModelCall:
    async def test_every_call_is_recorded_from_the_providers_usage(self, redis: Redis, keys: Keys) -> None:
        script = (
            Script()
            .tool_call("execute", command="a")
            .usage(prompt=1_000, completion=500, cached=400, reasoning=300)
            .reply("done")
            .usage(prompt=2_000, completion=100, cached=1_500)
        )
        ledger = UsageLedger(redis, keys)
        scope = _scope()
        recorder = UsageRecorder(ledger, PriceTable(BUILTIN_PRICES), scope)
        async with ScriptedModelServer(script) as server:
            agent = create_agent(chat_model(server, "gpt-5"), [execute], middleware=[ModelCallLimit(5, usage=recorder)])
            result = await agent.ainvoke({"messages": [HumanMessage("work")]})
        await recorder.flush()

        run = await ledger.run(scope.run_id)
        assert (run.calls, run.input_tokens, run.cached_input_tokens, run.output_tokens, run.reasoning_tokens) == (
            2,
            3_000,
            1_900,
            600,
            300,
        )
        price = BUILTIN_PRICES["gpt-5"]
        expected = price.cost(1_000, 400, 500) + price.cost(2_000, 1_500, 100)
        assert run.cost_usd == pytest.approx(expected)
        first = next(m for m in result["messages"] if isinstance(m, AIMessage))
        assert first.response_metadata[METADATA_KEY]["reasoning_tokens"] == 300
        assert first.response_metadata[METADATA_KEY]["cost_usd"] == pytest.approx(price.cost(1_000, 400, 500))
        for dimension, value in (
            (Dimension.THREAD, scope.thread_id),
            (Dimension.USER, "ada"),
            (Dimension.TEAM, "acme"),
            (Dimension.REPOSITORY, "acme/app"),
            (Dimension.MODEL, "gpt-5"),
        ):
            day = await ledger.day(dimension, value)
            assert day.calls == 2, dimension
            assert day.cost_usd == pytest.approx(expected), dimension

    async def test_a_subagents_calls_are_recorded_on_the_runs_recorder(self, redis: Redis, keys: Keys) -> None:
        script = Script().reply("found it").usage(prompt=500, completion=50)
        ledger = UsageLedger(redis, keys)
        scope = _scope()
        recorder = UsageRecorder(ledger, PriceTable(BUILTIN_PRICES), scope)
        subagent_limit = ModelCallLimit(StepBudget(5), subagent=True, usage=recorder)
        async with ScriptedModelServer(script) as server:
            agent = create_agent(chat_model(server, "gpt-5"), [], middleware=[subagent_limit])
            await agent.ainvoke({"messages": [HumanMessage("look")]})
        await recorder.flush()

        run = await ledger.run(scope.run_id)
        assert (run.calls, run.input_tokens, run.output_tokens) == (1, 500, 50)

    async def test_the_roll_ups_expire(self, redis: Redis, keys: Keys) -> None:
        ledger = UsageLedger(redis, keys, retention_days=3)
        scope = _scope()
        await ledger.add(scope, CallUsage("gpt-5", 10, 0, 5, 0, 0.001))
        ttl = await redis.ttl(keys.run_usage(scope.run_id))
        assert 0 < ttl <= 3 * 86_400

    async def test_a_model_without_a_price_has_an_unknown_cost_not_zero(self, redis: Redis, keys: Keys) -> None:
        script = Script().reply("done").usage(prompt=100, completion=10)
        ledger = UsageLedger(redis, keys)
        scope = _scope()
        recorder = UsageRecorder(ledger, PriceTable({}), scope)
        async with ScriptedModelServer(script) as server:
            agent = create_agent(chat_model(server, "gpt-5"), [], middleware=[ModelCallLimit(5, usage=recorder)])
            result = await agent.ainvoke({"messages": [HumanMessage("work")]})
        await recorder.flush()

        run = await ledger.run(scope.run_id)
        assert run.calls == 1
        assert run.input_tokens == 100
        assert run.cost_usd is None
        assert result["messages"][-1].response_metadata[METADATA_KEY]["cost_usd"] is None
        assert (await ledger.day(Dimension.MODEL, "gpt-5")).unpriced_calls >= 1

    async def test_the_calls_are_counted_in_prometheus(self, redis: Redis, keys: Keys) -> None:
        repository = f"acme/metrics-{uuid.uuid4().hex[:8]}"
        labels = {"role": "coder", "model": "gpt-5", "repository": repository}
        script = Script().reply("done").usage(prompt=1_000_000, completion=0)
        recorder = UsageRecorder(UsageLedger(redis, keys), PriceTable(BUILTIN_PRICES), _scope(repository))
        async with ScriptedModelServer(script) as server:
            agent = create_agent(chat_model(server, "gpt-5"), [], middleware=[ModelCallLimit(5, usage=recorder)])
            await agent.ainvoke({"messages": [HumanMessage("work")]})
        await recorder.flush()

        assert REGISTRY.get_sample_value("drydock_model_tokens_total", {**labels, "kind": "input"}) == 1_000_000
        assert REGISTRY.get_sample_value("drydock_model_cost_usd_total", labels) == pytest.approx(1.25)
        assert REGISTRY.get_sample_value("drydock_model_calls_total", {**labels, "priced": "true"}) == 1


class TestTheLedgersWrite:
    async def test_each_call_counts_on_every_roll_up_and_ranking_and_renews_their_expiry(
        self, redis: Redis, keys: Keys
    ) -> None:
        ledger = UsageLedger(redis, keys, retention_days=3)
        scope = _scope()
        await ledger.add(scope, CallUsage("gpt-5", 1_000, 400, 50, 20, 0.25), first=True)
        await ledger.add(scope, CallUsage("gpt-5", 10, 0, 5, 0, None))

        run = await ledger.run(scope.run_id)
        assert (run.runs, run.calls, run.unpriced_calls) == (1, 2, 1)
        tokens = (run.input_tokens, run.cached_input_tokens, run.output_tokens, run.reasoning_tokens)
        assert tokens == (1_010, 400, 55, 20)
        assert run.priced_cost_usd == pytest.approx(0.25)
        values = scope.values("gpt-5")
        for dimension, value in values.items():
            assert await ledger.day(dimension, value) == run, dimension
        today = datetime.now(UTC).date()
        for dimension, value in values.items():
            ranked = dict(await ledger.ranking(dimension, today))
            if dimension is Dimension.TEAM:
                assert ranked == {}
            else:
                assert ranked == {value: run}, dimension
        written = [keys.run_usage(scope.run_id)]
        written += [keys.usage(today.isoformat(), dimension.value, value) for dimension, value in values.items()]
        written += [keys.usage_ranking(today.isoformat(), d.value) for d in values if d is not Dimension.TEAM]
        for key in written:
            assert 0 < await redis.ttl(key) <= 3 * 86_400, key
