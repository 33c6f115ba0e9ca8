"""Cloning through the credential proxy while a part behind it recovers.

A clone that fails because something on the way is briefly unavailable (the proxy answers 503
while the store restarts; 502/504 or a refused connection while the proxy or the code host
restarts) is tried again with a growing pause until :data:`RETRY_WINDOW` has passed. Any other
failure (no such repository, access denied) is final at once. A transient failure that outlasts
the window raises :class:`CloneUnavailable`: the run fails, so its wake is redelivered later, or
buried as a dead letter after its last delivery, and is never completed without a clone.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable

import structlog

from drydock.sandbox.backend import CommandResult

log = structlog.get_logger(__name__)

RETRY_WINDOW = 90.0
"""Seconds a clone keeps retrying transient failures: longer than a store or proxy restart."""
FIRST_PAUSE = 0.5
LONGEST_PAUSE = 8.0

TRANSIENT = re.compile(
    r"returned error: 50[234]|Failed to connect|Connection refused|Connection reset|Empty reply from server"
    r"|Operation timed out|Connection timed out|Recv failure|transfer closed with outstanding",
    re.IGNORECASE,
)


class CloneUnavailable(RuntimeError):
    """The clone failed transiently for the whole retry window; the wake is to be tried again."""


def transient(output: str) -> bool:
    """Whether a failed clone's output names an outage worth retrying."""
    return TRANSIENT.search(output) is not None


async def clone_with_retries(
    attempt: Callable[[], Awaitable[CommandResult]],
    *,
    repository: str,
    thread_id: str,
    window: float = RETRY_WINDOW,
) -> CommandResult:
    """Run ``attempt`` until it succeeds, fails for good (returned), or fails transiently past
    ``window`` seconds (:class:`CloneUnavailable`)."""
    clock = asyncio.get_running_loop().time
    deadline = clock() + window
    pause = FIRST_PAUSE
    tries = 0
    while True:
        result = await attempt()
        tries += 1
        if result.exit_code == 0 or not transient(result.output):
            return result
        remaining = deadline - clock()
        tail = result.output.strip()[-300:]
        if remaining <= 0:
            raise CloneUnavailable(f"cloning {repository} failed transiently {tries} times over {window:.0f} s: {tail}")
        log.warning("clone failed transiently; retrying", thread_id=thread_id, repository=repository, tries=tries)
        await asyncio.sleep(min(pause, remaining))
        pause = min(pause * 2, LONGEST_PAUSE)
