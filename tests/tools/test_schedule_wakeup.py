"""``schedule_wakeup``: a wake-up for the thread's role at the asked time, within the bounds,
and refused beyond the per-thread cap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError
from redis.asyncio import Redis

from drydock.effects import EffectLedger, bound_call
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.scheduler import MAX_PENDING_PER_THREAD, Wakeups
from drydock.tools import schedule_wakeup
from tests.tools.conftest import MakeContext


@pytest.fixture
def wakeups(redis: Redis, keys: Keys) -> Wakeups:
    return Wakeups(redis, keys)


class TestScheduling:
    async def test_a_delay_from_now(self, make_context: MakeContext, wakeups: Wakeups, thread_id: str) -> None:
        before = datetime.now(UTC)
        tool = schedule_wakeup.build(make_context())

        result = await tool.ainvoke({"delay_seconds": 600, "note": "Check whether CI passed."})

        [pending] = await wakeups.pending(thread_id)
        assert (pending.id, pending.role, pending.note) == (result["id"], Role.CODER, "Check whether CI passed.")
        assert before + timedelta(seconds=600) <= pending.due_at <= datetime.now(UTC) + timedelta(seconds=600)
        assert result["due_at"] == pending.due_at.isoformat(timespec="seconds")

    async def test_a_time_of_day(self, make_context: MakeContext, wakeups: Wakeups, thread_id: str) -> None:
        at = (datetime.now(UTC) + timedelta(hours=3)).replace(microsecond=0)
        tool = schedule_wakeup.build(make_context())

        await tool.ainvoke({"at": at.astimezone(tz=None).isoformat(), "note": "Look at the deploy."})

        [pending] = await wakeups.pending(thread_id)
        assert pending.due_at == at


class TestRefusals:
    @pytest.mark.parametrize("delay", [59, 7 * 24 * 3600 + 1])
    async def test_a_delay_out_of_bounds_is_invalid(self, make_context: MakeContext, delay: int) -> None:
        tool = schedule_wakeup.build(make_context())

        with pytest.raises(ValidationError, match="delay_seconds"):
            await tool.ainvoke({"delay_seconds": delay, "note": "too soon or too late"})

    @pytest.mark.parametrize(
        ("offset", "problem"),
        [(timedelta(seconds=10), "between one minute and seven days"), (timedelta(days=8), "between one minute")],
    )
    async def test_a_time_out_of_bounds(
        self, make_context: MakeContext, wakeups: Wakeups, thread_id: str, offset: timedelta, problem: str
    ) -> None:
        tool = schedule_wakeup.build(make_context())

        answer = await tool.ainvoke({"at": (datetime.now(UTC) + offset).isoformat(), "note": "x"})

        assert problem in answer
        assert await wakeups.pending(thread_id) == []

    async def test_a_time_without_a_zone(self, make_context: MakeContext) -> None:
        tool = schedule_wakeup.build(make_context())

        answer = await tool.ainvoke({"at": "2030-01-31T09:00:00", "note": "x"})

        assert answer == "`at` needs a time zone, e.g. 2030-01-31T09:00:00Z."

    @pytest.mark.parametrize("arguments", [{}, {"delay_seconds": 60, "at": "2030-01-31T09:00:00Z"}])
    async def test_exactly_one_of_delay_and_time(self, make_context: MakeContext, arguments: dict[str, object]) -> None:
        tool = schedule_wakeup.build(make_context())

        answer = await tool.ainvoke({"note": "x", **arguments})

        assert answer == "Give exactly one of `delay_seconds` or `at`."

    async def test_beyond_the_per_thread_cap(self, make_context: MakeContext, wakeups: Wakeups, thread_id: str) -> None:
        due = datetime.now(UTC) + timedelta(hours=1)
        for index in range(MAX_PENDING_PER_THREAD):
            await wakeups.schedule(thread_id, Role.CODER, due, f"wake-up {index}")
        tool = schedule_wakeup.build(make_context())

        answer = await tool.ainvoke({"delay_seconds": 60, "note": "one more"})

        assert answer == (
            f"Not scheduled: the thread already has {MAX_PENDING_PER_THREAD} pending wake-ups, the most it may "
            "have; the earlier ones will wake this thread."
        )
        assert len(await wakeups.pending(thread_id)) == MAX_PENDING_PER_THREAD


class TestReplay:
    """A replayed ``schedule_wakeup`` call leaves one wake-up, wherever the crash fell."""

    CALL = "step-12.0"

    async def test_a_crash_after_scheduling_finds_the_wake_up(
        self, make_context: MakeContext, wakeups: Wakeups, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        effect = f"{self.CALL}:wakeup"
        await EffectLedger(redis, keys).claim(thread_id, effect)
        due = datetime.now(UTC) + timedelta(minutes=10)
        first = await wakeups.schedule(
            thread_id, Role.CODER, due, "Check CI.", wakeup_id=schedule_wakeup._wakeup_id(effect)
        )
        tool = schedule_wakeup.build(make_context())

        with bound_call(self.CALL):
            result = await tool.ainvoke({"delay_seconds": 600, "note": "Check CI."})

        assert [w.id for w in await wakeups.pending(thread_id)] == [first] == [result["id"]]

    async def test_a_crash_after_the_ledger_record_schedules_nothing_more(
        self, make_context: MakeContext, wakeups: Wakeups, thread_id: str
    ) -> None:
        tool = schedule_wakeup.build(make_context())

        for _ in range(2):
            with bound_call(self.CALL):
                await tool.ainvoke({"delay_seconds": 600, "note": "Check CI."})

        assert len(await wakeups.pending(thread_id)) == 1
