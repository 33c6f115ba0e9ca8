"""Pausing a thread at a budget and continuing it.

A run stopped at a spend limit, or refused before it started because a day budget is spent,
pauses its thread: a record of the limit reached. While it is paused, nothing the thread
receives starts work, except a continue from the thread's owner or an administrator: the
comment or reply ``@drydock continue`` (:func:`asks_to_continue`), the Slack button
(:data:`CONTINUE_ACTION`) or the dashboard's action. A continue replaces the pause with a
:class:`~drydock.budgets.Grant` for the thread's next run (one allowance more, taken once by
that run), in one script, so two continues grant one allowance. A pause at a day budget lapses
at the next UTC midnight, when the day's spend starts again from zero.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from redis.asyncio import Redis

from drydock.budgets import Grant, LimitKind, Reached
from drydock.infra.redis import Keys

CONTINUE_ACTION = "drydock_continue"
"""The ``action_id`` of the Slack button that continues a paused thread."""
PAUSE_TTL = timedelta(days=7)
GRANT_TTL = timedelta(days=1)

_PRESSED = re.compile(rf"^\[pressed {CONTINUE_ACTION}\]")

_RESUME = """
if redis.call('DEL', KEYS[1]) == 1 then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

# KEYS: the pause, the grant. Returns {'paused', pause} while paused (the grant is left alone),
# else {'granted', grant} with the grant taken, else nothing.
_PAUSE_OR_GRANT = """
local paused = redis.call('GET', KEYS[1])
if paused then return {'paused', paused} end
local grant = redis.call('GETDEL', KEYS[2])
if grant then return {'granted', grant} end
return {}
"""


def asks_to_continue(text: str, handle: str) -> bool:
    """Whether ``text`` is a continue: the whole message ``@drydock continue`` (the handle may be
    left out in a thread the agent works in, or be Slack's ``<@U…>`` mention; a trailing period or
    exclamation mark is fine), or a press of the Slack button."""
    if _PRESSED.match(text.strip()):
        return True
    pattern = rf"^\s*(?:{re.escape(handle)}|<@[A-Z0-9]+>)?[\s,:]*continue\s*[.!]?\s*$"
    return re.match(pattern, text, re.IGNORECASE) is not None


def _until_midnight(now: datetime) -> timedelta:
    tomorrow = (now.astimezone(UTC) + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(tomorrow - now, timedelta(seconds=1))


class Continuations:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._resume = redis.register_script(_RESUME)
        self._pause_or_grant = redis.register_script(_PAUSE_OR_GRANT)

    async def pause(self, thread_id: str, reached: Reached) -> None:
        """Pause the thread at ``reached`` until it is continued (or, for a day budget, the day ends)."""
        ttl = PAUSE_TTL if reached.kind is LimitKind.RUN else _until_midnight(datetime.now(UTC))
        await self._redis.set(self._keys.budget_pause(thread_id), reached.to_json(), px=int(ttl.total_seconds() * 1000))

    async def paused(self, thread_id: str) -> Reached | None:
        """The limit the thread is paused at; None when it is not paused."""
        raw = await cast(Any, self._redis.get(self._keys.budget_pause(thread_id)))
        if raw is None:
            return None
        return Reached.from_json(raw.decode() if isinstance(raw, bytes) else str(raw))

    async def resume(self, thread_id: str, grant: Grant) -> bool:
        """Continue the paused thread with ``grant`` for its next run; False when it was not paused."""
        done = await self._resume(
            keys=[self._keys.budget_pause(thread_id), self._keys.budget_grant(thread_id)],
            args=[grant.to_json(), int(GRANT_TTL.total_seconds() * 1000)],
        )
        return bool(done)

    async def take_grant(self, thread_id: str) -> Grant | None:
        """The grant a continue left for this run, taken so that it serves one run only."""
        raw = await cast(Any, self._redis.getdel(self._keys.budget_grant(thread_id)))
        if raw is None:
            return None
        return Grant.from_json(raw.decode() if isinstance(raw, bytes) else str(raw))

    async def paused_or_take_grant(self, thread_id: str) -> Reached | Grant | None:
        """In one round trip: the limit the thread is paused at, or (only when it is not paused)
        the grant a continue left, taken as :meth:`take_grant` takes it; None when neither."""
        keys = [self._keys.budget_pause(thread_id), self._keys.budget_grant(thread_id)]
        reply = await cast(Any, self._pause_or_grant(keys=keys))
        if not reply:
            return None
        kind, raw = (item.decode() if isinstance(item, bytes) else str(item) for item in reply)
        return Reached.from_json(raw) if kind == "paused" else Grant.from_json(raw)


def grant_for(reached: Reached, run_usd: float | None, by: str) -> Grant:
    """The allowance a continue gives: one run's spend limit past a day budget (that day budget
    again when runs have no limit); a run limit needs none, the next run's spend starts at zero."""
    if reached.kind is LimitKind.RUN:
        return Grant(extra_usd=0.0, by=by)
    return Grant(extra_usd=run_usd if run_usd is not None else reached.limit_usd, by=by)
