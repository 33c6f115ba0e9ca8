"""What a thread is doing, for lists and the thread page: its ``state`` field and state facet.

The worker's run events set it (:meth:`ThreadStates.observe`): ``started`` makes it running, the
end of a run makes it idle (completed, or stopped at the step limit), failed (an ``error``) or
stopped (a stop request honoured). Each change also records ``last_activity``, and the end of a
run its ``outcome`` (:data:`EVENT_OUTCOMES`), so a list can tell a completed run from one that
never started. The dashboard marks a thread it hands a message to as queued,
unless a run is going on (that run picks the message up). A thread no run has touched yet has no
state. A worker that dies mid-run leaves the thread running until the wake's redelivery resumes
it, which is the truth: the run is not over.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import cast

from redis.asyncio import Redis

from drydock.bus.envelopes import EventType, RunEvent
from drydock.infra.redis import Keys
from drydock.threads.fields import LAST_ACTIVITY, OUTCOME, STATE
from drydock.threads.index import FACETS, SEPARATOR


class ThreadState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    IDLE = "idle"
    FAILED = "failed"
    STOPPED = "stopped"


EVENT_STATES: dict[EventType, ThreadState] = {
    EventType.STARTED: ThreadState.RUNNING,
    EventType.COMPLETED: ThreadState.IDLE,
    EventType.STEP_LIMIT: ThreadState.IDLE,
    EventType.ERROR: ThreadState.FAILED,
    EventType.STOPPED: ThreadState.STOPPED,
}
"""The run events that change a thread's state; the others leave it."""

EVENT_OUTCOMES: dict[EventType, str] = {
    EventType.COMPLETED: "completed",
    EventType.STEP_LIMIT: "step_limit",
    EventType.ERROR: "failed",
    EventType.STOPPED: "stopped",
}
"""How a run ended, by the event that ended it."""

_STATE_POSITION = FACETS.index(STATE) + 1

# KEYS: the thread's hash, the facets hash, then one set per state (in ThreadState order).
# ARGV: thread id, new state, the position of its set among KEYS, the last activity, the outcome
# ('' to keep it), then states not to replace.
_SET = f"""
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local current = redis.call('HGET', KEYS[1], 'state')
for i = 6, #ARGV do
  if current == ARGV[i] then return 0 end
end
redis.call('HSET', KEYS[1], 'state', ARGV[2], '{LAST_ACTIVITY}', ARGV[4])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], '{OUTCOME}', ARGV[5]) end
local facets = redis.call('HGET', KEYS[2], ARGV[1])
if not facets then return 1 end
local parts, start = {{}}, 1
while true do
  local found = string.find(facets, '\\31', start, true)
  if not found then parts[#parts + 1] = string.sub(facets, start); break end
  parts[#parts + 1] = string.sub(facets, start, found - 1)
  start = found + 1
end
parts[{_STATE_POSITION}] = ARGV[2]
redis.call('HSET', KEYS[2], ARGV[1], table.concat(parts, '{SEPARATOR}'))
for i = 3, #KEYS do redis.call('ZREM', KEYS[i], ARGV[1]) end
redis.call('ZADD', KEYS[tonumber(ARGV[3])], parts[#parts], ARGV[1])
return 1
"""


class ThreadStates:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._set = redis.register_script(_SET)

    async def set(
        self,
        thread_id: str,
        state: ThreadState,
        *,
        unless: Iterable[ThreadState] = (),
        at: datetime | None = None,
        outcome: str = "",
    ) -> bool:
        """Set the thread's state (and its last activity, ``at`` or now; and the outcome of the run
        that ended, if one did), unless it is one of ``unless``; False if it was left (or the thread
        does not exist)."""
        states = list(ThreadState)
        at = at or datetime.now(UTC)
        written = await self._set(
            keys=[
                self._keys.thread(thread_id),
                self._keys.thread_facets(),
                *(self._keys.threads_by(STATE, value) for value in states),
            ],
            args=[
                thread_id,
                state.value,
                3 + states.index(state),
                at.isoformat(),
                outcome,
                *(value.value for value in unless),
            ],
        )
        return int(written) == 1

    async def get(self, thread_id: str) -> ThreadState | None:
        raw = cast(str | None, await self._redis.hget(self._keys.thread(thread_id), STATE))
        return ThreadState(raw) if raw else None

    async def observe(self, event: RunEvent) -> None:
        """Follow a run event: the events of :data:`EVENT_STATES` change the state."""
        state = EVENT_STATES.get(event.type)
        if state is not None:
            await self.set(event.thread_id, state, at=event.at, outcome=EVENT_OUTCOMES.get(event.type, ""))
