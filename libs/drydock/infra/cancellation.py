"""Honouring a cancellation that a library swallowed.

On Python 3.11, ``asyncio.wait_for`` returns the awaited call's result when a cancellation
lands as that call finishes; redis-py sends every command through it, and nats-py's fetch
turns a cancellation into its own timeout. The task still counts as cancelling, so a loop that
checks between its iterations stops all the same, instead of running on while whoever
cancelled it waits forever.
"""

from __future__ import annotations

import asyncio


def raise_if_cancelling() -> None:
    """Raise ``CancelledError`` if the current task was asked to stop."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def pause(seconds: float) -> None:
    """``asyncio.sleep`` for a loop that runs until cancelled: a swallowed cancellation ends it."""
    raise_if_cancelling()
    await asyncio.sleep(seconds)
