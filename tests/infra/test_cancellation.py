from __future__ import annotations

import asyncio
import contextlib

import pytest

from drydock.infra.cancellation import pause


async def _swallow_one_cancellation_then_loop(passes: list[int]) -> None:
    # What asyncio.wait_for does on Python 3.11 when the cancellation meets the answer.
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(10)
    while True:
        passes.append(1)
        await pause(0.01)


class TestPause:
    async def test_a_swallowed_cancellation_ends_the_loop_at_its_next_pause(self) -> None:
        passes: list[int] = []
        task = asyncio.create_task(_swallow_one_cancellation_then_loop(passes))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 1)
        assert passes == [1]

    async def test_it_sleeps_otherwise(self) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await pause(0.05)
        assert loop.time() - started >= 0.05
