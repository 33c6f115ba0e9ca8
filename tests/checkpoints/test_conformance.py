"""LangGraph's checkpointer conformance suite against our checkpointer on the embedded Valkey.

``langgraph-checkpoint-plainredis`` is young and pinned; this suite is what shows a regression
when it is upgraded. Every capability the saver implements must pass, and so must every base
capability (a base capability the saver stopped implementing fails here too).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES
from langgraph.checkpoint.conformance.report import CapabilityReport
from redis.asyncio import Redis

from drydock.checkpoints import open_checkpointer
from drydock.config import Settings
from drydock.infra.redis import Keys


async def _delete_prefix(redis: Redis, prefix: str) -> None:
    async for key in redis.scan_iter(match=f"{prefix}:*", count=500):
        await redis.delete(key)


def _failures(report: CapabilityReport) -> str:
    lines = []
    for name, result in report.results.items():
        if result.detected and result.passed is not True:
            lines.append(f"{name}: {result.tests_failed} failed")
            lines.extend(f"  {failure}" for failure in result.failures)
    return "\n".join(lines)


async def test_the_checkpointer_passes_langgraph_conformance(settings: Settings, redis: Redis, keys: Keys) -> None:
    suites = 0

    @checkpointer_test(name="drydock-redis-checkpointer")
    async def factory() -> AsyncIterator[BaseCheckpointSaver[str]]:
        nonlocal suites
        suites += 1
        suite_keys = Keys(f"{keys.prefix}-{suites}")
        suite_settings = settings.redis.model_copy(update={"key_prefix": suite_keys.prefix})
        async with open_checkpointer(suite_settings) as saver:
            yield saver
        await _delete_prefix(redis, suite_keys.checkpoints())

    report = await validate(factory)

    assert report.passed_all(), _failures(report)
    base = {capability.value for capability in BASE_CAPABILITIES}
    missing = sorted(name for name in base if report.results[name].passed is not True)
    assert not missing, f"base capabilities not passed: {missing}"
    assert sum(result.tests_passed for result in report.results.values()) > 0
