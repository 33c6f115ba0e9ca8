"""``schedule_wakeup``: wake this thread again later, with a note to itself (check CI again, look
whether a dependency was released). Backed by :class:`drydock.scheduler.Wakeups`; the note
arrives in the thread's inbox as ``Scheduled wake-up: <note>``."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from drydock.scheduler import TooManyWakeups, Wakeups
from drydock.tools.context import ToolContext

NAME = "schedule_wakeup"

MIN_DELAY = timedelta(seconds=60)
MAX_DELAY = timedelta(days=7)

DESCRIPTION = (
    "Wake this thread again later, e.g. to check on CI or a deployment instead of waiting. Give "
    "either `delay_seconds` (60 to 604800, i.e. 7 days) or `at` (an ISO 8601 time with time zone "
    "within that range), and a `note` telling your future self what to do; it arrives as a new "
    "message 'Scheduled wake-up: <note>'. End the current work normally after scheduling."
)


class ScheduleWakeupInput(BaseModel):
    note: str = Field(min_length=1, max_length=2000, description="What to do when woken.")
    delay_seconds: int | None = Field(
        default=None,
        ge=int(MIN_DELAY.total_seconds()),
        le=int(MAX_DELAY.total_seconds()),
        description="Seconds from now (60 to 604800).",
    )
    at: datetime | None = Field(
        default=None, description="When to wake, ISO 8601 with time zone, e.g. 2030-01-31T09:00:00Z."
    )


def _due(delay_seconds: int | None, at: datetime | None, now: datetime) -> datetime:
    if (delay_seconds is None) == (at is None):
        raise ToolException("Give exactly one of `delay_seconds` or `at`.")
    if delay_seconds is not None:
        return now + timedelta(seconds=delay_seconds)
    assert at is not None
    if at.tzinfo is None:
        raise ToolException("`at` needs a time zone, e.g. 2030-01-31T09:00:00Z.")
    if not now + MIN_DELAY - timedelta(seconds=1) <= at <= now + MAX_DELAY:
        raise ToolException(
            f"`at` must lie between one minute and seven days from now (it is now {now.isoformat(timespec='seconds')})."
        )
    return at.astimezone(UTC)


def _wakeup_id(effect_id: str) -> str:
    """The wake-up's id follows from the effect's, so a replay finds the wake-up it scheduled."""
    return hashlib.sha256(effect_id.encode()).hexdigest()[:32]


def build(context: ToolContext) -> BaseTool:
    async def schedule_wakeup(
        note: str, delay_seconds: int | None = None, at: datetime | None = None
    ) -> dict[str, Any]:
        due = _due(delay_seconds, at, datetime.now(UTC))
        wakeups = Wakeups(context.redis, context.keys)

        def scheduled(wakeup_id: str, at: datetime) -> dict[str, Any]:
            return {"id": wakeup_id, "due_at": at.isoformat(timespec="seconds")}

        async def schedule(effect_id: str) -> dict[str, Any]:
            try:
                wakeup_id = await wakeups.schedule(
                    context.scope.thread_id, context.scope.role, due, note, wakeup_id=_wakeup_id(effect_id)
                )
            except TooManyWakeups as refusal:
                raise ToolException(f"Not scheduled: {refusal}; the earlier ones will wake this thread.") from None
            return scheduled(wakeup_id, due)

        async def find(effect_id: str) -> dict[str, Any] | None:
            found = await wakeups.get(_wakeup_id(effect_id))
            return None if found is None else scheduled(found.id, found.due_at)

        return await context.effects.once("wakeup", schedule, find=find)

    return StructuredTool.from_function(
        coroutine=schedule_wakeup,
        name=NAME,
        description=DESCRIPTION,
        args_schema=ScheduleWakeupInput,
        handle_tool_error=True,
    )
