"""Waiting in tests: until a condition holds or a deadline passes, never for a count of tries.

A machine running the suite beside other work is slower by a factor nobody knows in advance, so
a wait is bounded by time, and the time is generous: a condition that holds returns at once.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")


@overload
async def eventually(
    check: Callable[[], Awaitable[T | None]], within: float = 30.0, *, every: float = 0.02, what: str = ""
) -> T: ...


@overload
async def eventually(
    check: Callable[[], T | None], within: float = 30.0, *, every: float = 0.02, what: str = ""
) -> T: ...


async def eventually(check: Callable[[], Any], within: float = 30.0, *, every: float = 0.02, what: str = "") -> Any:
    """Call ``check`` (plain or async) until it returns something truthy, and return that.

    Fails with an ``AssertionError`` naming ``what`` once ``within`` seconds have passed.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        found = check()
        if inspect.isawaitable(found):
            found = await found
        if found:
            return found
        if loop.time() >= deadline:
            raise AssertionError(f"{what or 'the condition'} did not hold within {within:g} s")
        await asyncio.sleep(every)
