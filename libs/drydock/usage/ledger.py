"""Usage and cost roll-ups in Redis: one hash of counters per run, and per day (UTC) per
thread, user, team, repository and model, each expiring after the retention, so the store
stays bounded. Cost is kept in nanodollars (integers, exact sums); calls of a model without a
known price are counted apart, and a total with any of them has an unknown cost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Any, cast

from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.usage.calls import CallUsage

NANO = 1_000_000_000


class Dimension(StrEnum):
    """What a daily roll-up is kept per. ``team`` is the organization that owns the run's
    repository (the unit the team defaults' ``allowed_organizations`` lists)."""

    THREAD = "thread"
    USER = "user"
    TEAM = "team"
    REPOSITORY = "repository"
    MODEL = "model"


@dataclass(frozen=True)
class UsageScope:
    """Who and what a run's model calls count against."""

    run_id: str
    thread_id: str
    role: str
    user_id: str | None = None
    repository: str | None = None

    @property
    def team(self) -> str | None:
        return self.repository.split("/", 1)[0].lower() if self.repository else None

    def values(self, model: str) -> dict[Dimension, str]:
        found = {
            Dimension.THREAD: self.thread_id,
            Dimension.USER: self.user_id,
            Dimension.TEAM: self.team,
            Dimension.REPOSITORY: self.repository.lower() if self.repository else None,
            Dimension.MODEL: model,
        }
        return {dimension: value for dimension, value in found.items() if value}


@dataclass(frozen=True)
class UsageTotals:
    """Summed usage; ``cost_usd`` is None when any call had no known price (or there were none)."""

    runs: int = 0
    """Runs with a model call counted here (a run whose calls span midnight counts on its first day)."""
    calls: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    priced_cost_usd: float = 0.0
    """The cost of the calls with a known price."""
    unpriced_calls: int = 0

    @property
    def cost_usd(self) -> float | None:
        return None if self.unpriced_calls or not self.calls else self.priced_cost_usd

    @classmethod
    def from_hash(cls, raw: Mapping[str, str]) -> UsageTotals:
        def number(name: str) -> int:
            return int(raw.get(name, 0))

        return cls(
            runs=number("runs"),
            calls=number("calls"),
            input_tokens=number("input"),
            cached_input_tokens=number("cached_input"),
            output_tokens=number("output"),
            reasoning_tokens=number("reasoning"),
            priced_cost_usd=number("cost_nanousd") / NANO,
            unpriced_calls=number("unpriced_calls"),
        )

    def __add__(self, other: UsageTotals) -> UsageTotals:
        return UsageTotals(
            runs=self.runs + other.runs,
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            priced_cost_usd=self.priced_cost_usd + other.priced_cost_usd,
            unpriced_calls=self.unpriced_calls + other.unpriced_calls,
        )


def _day(at: datetime | None) -> str:
    return (at or datetime.now(UTC)).astimezone(UTC).date().isoformat()


_ADD = """
local ttl, cost, ranked = ARGV[1], ARGV[2], tonumber(ARGV[3])
for i = 1, ranked do
    redis.call('ZINCRBY', KEYS[i], cost, ARGV[3 + i])
    redis.call('EXPIRE', KEYS[i], ttl)
end
for i = ranked + 1, #KEYS do
    for j = 4 + ranked, #ARGV, 2 do
        redis.call('HINCRBY', KEYS[i], ARGV[j], ARGV[j + 1])
    end
    redis.call('EXPIRE', KEYS[i], ttl)
end
"""
"""Adds a call to the rankings (``KEYS[1..ranked]``, a member each after the first three
arguments) and to the totals (the other keys; the counters' names and amounts follow the
members), each key expiring ``ttl`` seconds after its last change. The keys lie in several
hash slots: like the checkpoints, the ledger runs on a single Redis, not on Redis Cluster."""


class UsageLedger:
    """Writes and reads the roll-ups; one script (one command, one round trip) per model call.
    A pipeline of the same commands was about forty of them per call, each packed, answered
    and checked by redis-py on the worker's event loop during the agent's step."""

    def __init__(self, redis: Redis, keys: Keys, *, retention_days: int = 90) -> None:
        self._redis = redis
        self._keys = keys
        self._ttl = retention_days * 86_400
        self._add = redis.register_script(_ADD)

    async def add(self, scope: UsageScope, call: CallUsage, *, at: datetime | None = None, first: bool = False) -> None:
        """Count ``call`` for the run and, on its day, for each of the scope's dimensions; the
        ``first`` call of a run counts the run too."""
        day = _day(at)
        counters: dict[str, int] = {
            "runs": int(first),
            "calls": 1,
            "input": call.input_tokens,
            "cached_input": call.cached_input_tokens,
            "output": call.output_tokens,
            "reasoning": call.reasoning_tokens,
        }
        if call.cost_usd is None:
            counters["unpriced_calls"] = 1
        else:
            counters["cost_nanousd"] = round(call.cost_usd * NANO)
        values = scope.values(call.model)
        # The usage page ranks threads, users, repositories and models.
        ranked = {dimension: value for dimension, value in values.items() if dimension is not Dimension.TEAM}
        rankings = [self._keys.usage_ranking(day, dimension.value) for dimension in ranked]
        totals = [self._keys.run_usage(scope.run_id)]
        totals += [self._keys.usage(day, dimension.value, value) for dimension, value in values.items()]
        amounts = [item for name, amount in counters.items() if amount for item in (name, amount)]
        await self._add(
            keys=[*rankings, *totals],
            args=[self._ttl, counters.get("cost_nanousd", 0), len(rankings), *ranked.values(), *amounts],
        )

    async def run(self, run_id: str) -> UsageTotals:
        """The usage of one run so far."""
        raw = await cast(Any, self._redis.hgetall(self._keys.run_usage(run_id)))
        return UsageTotals.from_hash(_text(raw))

    async def day(self, dimension: Dimension, value: str, on: date | None = None) -> UsageTotals:
        """The usage of one thread, user, team, repository or model on one day (UTC; today by default)."""
        day = (on or datetime.now(UTC).date()).isoformat()
        raw = await cast(Any, self._redis.hgetall(self._keys.usage(day, dimension.value, value)))
        return UsageTotals.from_hash(_text(raw))

    async def run_and_days(
        self, run_id: str | None, wanted: list[tuple[Dimension, str]], on: date | None = None
    ) -> tuple[UsageTotals, list[UsageTotals]]:
        """One round trip: the run's usage (empty when ``run_id`` is None) and each of ``wanted``'s
        on one day (today by default)."""
        day = (on or datetime.now(UTC).date()).isoformat()
        pipe = self._redis.pipeline(transaction=False)
        if run_id is not None:
            pipe.hgetall(self._keys.run_usage(run_id))
        for dimension, value in wanted:
            pipe.hgetall(self._keys.usage(day, dimension.value, value))
        raws = [UsageTotals.from_hash(_text(raw)) for raw in await pipe.execute()] if run_id or wanted else []
        if run_id is None:
            return UsageTotals(), raws
        return raws[0], raws[1:]

    async def ranking(self, dimension: Dimension, on: date, *, top: int = 10) -> list[tuple[str, UsageTotals]]:
        """The ``top`` threads, users, teams, repositories or models of one day by known cost, with
        their totals (one with no known price ranks by its priced part)."""
        day = on.isoformat()
        members = await cast(Any, self._redis.zrevrange(self._keys.usage_ranking(day, dimension.value), 0, top - 1))
        names = [m.decode() if isinstance(m, bytes) else str(m) for m in members]
        pipe = self._redis.pipeline(transaction=False)
        for name in names:
            pipe.hgetall(self._keys.usage(day, dimension.value, name))
        raws = await pipe.execute() if names else []
        return [(name, UsageTotals.from_hash(_text(raw))) for name, raw in zip(names, raws, strict=True)]

    async def days(self, dimension: Dimension, value: str, days: list[date]) -> list[UsageTotals]:
        """The usage of one thread, user, team, repository or model on each of ``days``."""
        pipe = self._redis.pipeline(transaction=False)
        for day in days:
            pipe.hgetall(self._keys.usage(day.isoformat(), dimension.value, value))
        return [UsageTotals.from_hash(_text(raw)) for raw in await pipe.execute()]


def _text(raw: Mapping[Any, Any]) -> dict[str, str]:
    return {
        (k.decode() if isinstance(k, bytes) else str(k)): (v.decode() if isinstance(v, bytes) else str(v))
        for k, v in raw.items()
    }
