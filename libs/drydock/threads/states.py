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

from redis.asyncio import Redis

from drydock.bus.envelopes import EventType, RunEvent
from drydock.infra.redis import Keys
from drydock.threads.fields import ThreadState
from drydock.threads.metadata import ThreadMetadataStore

__all__ = ["EVENT_OUTCOMES", "EVENT_STATES", "ThreadState", "ThreadStates"]

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


class ThreadStates:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._metadata = ThreadMetadataStore(redis, keys)

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
        return await self._metadata.set_state(
            thread_id, state, unless=unless, at=at or datetime.now(UTC), outcome=outcome
        )

    async def get(self, thread_id: str) -> ThreadState | None:
        return await self._metadata.state(thread_id)

    async def observe(self, event: RunEvent) -> None:
        """Follow a run event: the events of :data:`EVENT_STATES` change the state."""
        state = EVENT_STATES.get(event.type)
        if state is not None:
            await self.set(event.thread_id, state, at=event.at, outcome=EVENT_OUTCOMES.get(event.type, ""))
