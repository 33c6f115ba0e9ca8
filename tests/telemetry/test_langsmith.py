from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import langsmith
import pytest
from langsmith import traceable

import drydock.telemetry.langsmith as module
from drydock.telemetry.langsmith import keep_untraced_bookkeeping_inline


class CountingExecutor(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


@pytest.fixture
async def executor() -> AsyncIterator[CountingExecutor]:
    """The loop's default executor, counting what is handed to it; the overrides are reset after."""
    pool = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(pool)
    yield pool
    langsmith.set_runtime_overrides()


@traceable(name="step")
async def step(value: int) -> tuple[int, int]:
    return value * 2, threading.get_ident()


class TestUntracedBookkeeping:
    async def test_by_default_every_traced_call_goes_through_the_executor(self, executor: CountingExecutor) -> None:
        langsmith.set_runtime_overrides()
        assert (await step(2))[0] == 4
        assert executor.submitted >= 2

    async def test_untraced_calls_stay_on_the_event_loop(self, executor: CountingExecutor) -> None:
        assert keep_untraced_bookkeeping_inline() is True
        assert await step(2) == (4, threading.get_ident())
        assert executor.submitted == 0

    async def test_with_tracing_on_at_start_up_the_thread_hand_off_stays(
        self, executor: CountingExecutor, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(module, "tracing_is_enabled", lambda: True)
        langsmith.set_runtime_overrides()
        assert keep_untraced_bookkeeping_inline() is False
        assert (await step(2))[0] == 4
        assert executor.submitted >= 2
