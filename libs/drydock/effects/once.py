"""Making one external write once, whatever replays it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from drydock.effects.calls import current_call
from drydock.effects.ledger import EffectLedger

log = structlog.get_logger(__name__)

Write = Callable[[str], Awaitable[dict[str, Any]]]
"""Performs the write, given the effect id to mark the external object with; returns its result."""
Find = Callable[[str], Awaitable[dict[str, Any] | None]]
"""Looks the marked object up by effect id; the result the write returned, or ``None``."""


class Effects:
    """The effects of one thread's runs."""

    def __init__(self, ledger: EffectLedger, thread_id: str) -> None:
        self._ledger = ledger
        self._thread_id = thread_id

    async def once(self, name: str, write: Write, *, find: Find | None = None) -> dict[str, Any]:
        """Make the effect ``name`` of the current tool call's position once and return its result.

        The ledger is claimed before ``write`` and completed after it. A replay of a completed
        effect returns the recorded result. A replay of a claimed one (the earlier attempt stopped
        between its claim and its record) first asks ``find`` for the marked object; without a
        marker (``find`` is ``None``) the write is repeated, which the caller uses only where the
        external API is idempotent (a label, a reaction, an update to given values).
        """
        effect_id = f"{current_call()}:{name}"
        earlier = await self._ledger.claim(self._thread_id, effect_id)
        if earlier is not None and earlier.done and earlier.result is not None:
            log.info("effect already made", thread_id=self._thread_id, effect=effect_id)
            return earlier.result
        if earlier is not None and find is not None:
            found = await find(effect_id)
            if found is not None:
                log.info("effect found by its marker", thread_id=self._thread_id, effect=effect_id)
                await self._ledger.record(self._thread_id, effect_id, found)
                return found
        result = await write(effect_id)
        await self._ledger.record(self._thread_id, effect_id, result)
        return result
