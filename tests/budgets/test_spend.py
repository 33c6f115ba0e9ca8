"""Spend checks against the usage roll-ups in Redis: the run's limit, the day budgets, a
repository's overrides of the team's limits, and an unknown cost counting as reaching a limit."""

from __future__ import annotations

import uuid

from redis.asyncio import Redis

from drydock.accounts import RepositoryBudgets, TeamBudgets
from drydock.budgets import Grant, LimitKind, Limits, SpendCheck
from drydock.infra.redis import Keys
from drydock.usage import CallUsage, UsageLedger, UsageScope

REPOSITORY = "acme/widgets"


def check(redis: Redis, keys: Keys, limits: Limits, run_id: str, grant: Grant | None = None) -> SpendCheck:
    ledger = UsageLedger(redis, keys)
    return SpendCheck(ledger, limits, run_id=run_id, user_id="ada", repository=REPOSITORY, grant=grant)


async def spend(redis: Redis, keys: Keys, run_id: str, cost: float | None, *, user: str = "ada") -> None:
    scope = UsageScope(run_id=run_id, thread_id="t", role="coder", user_id=user, repository=REPOSITORY)
    await UsageLedger(redis, keys).add(scope, CallUsage("m", 1000, 0, 10, 0, cost))


class TestLimits:
    def test_a_repository_overrides_the_team_and_keeps_the_rest(self) -> None:
        team = TeamBudgets(run_usd=1.0, run_model_calls=50, user_day_usd=10.0, repository_day_usd=20.0, active_runs=3)
        limits = Limits.of(team, RepositoryBudgets(run_usd=0.25))
        assert limits == Limits(
            run_usd=0.25, run_model_calls=50, user_day_usd=10.0, repository_day_usd=20.0, active_runs=3
        )
        assert Limits.of(TeamBudgets()).spend is False
        assert Limits.of(TeamBudgets(active_runs=2)).spend is False
        assert Limits.of(TeamBudgets(user_day_usd=1.0)).spend is True


class TestRunLimit:
    async def test_reached_once_the_run_spent_its_limit(self, redis: Redis, keys: Keys) -> None:
        run_id = uuid.uuid4().hex
        guard = check(redis, keys, Limits(run_usd=0.5), run_id)
        await spend(redis, keys, run_id, 0.3)
        assert await guard.reached() is None
        await spend(redis, keys, run_id, 0.3)
        reached = await guard.reached()
        assert reached is not None
        assert (reached.kind, reached.limit_usd, round(reached.spent_usd, 6)) == (LimitKind.RUN, 0.5, 0.6)
        assert reached.spent_text == "spent $0.60 in this run"

    async def test_another_run_starts_from_zero(self, redis: Redis, keys: Keys) -> None:
        await spend(redis, keys, "earlier", 5.0)
        assert await check(redis, keys, Limits(run_usd=0.5), "now").reached() is None


class TestDayBudgets:
    async def test_a_users_day_is_summed_over_runs(self, redis: Redis, keys: Keys) -> None:
        await spend(redis, keys, "one", 0.6)
        await spend(redis, keys, "two", 0.6)
        await spend(redis, keys, "three", 5.0, user="bob")
        reached = await check(redis, keys, Limits(user_day_usd=1.0), "now").day_reached()
        assert reached is not None
        assert (reached.kind, reached.subject) == (LimitKind.USER_DAY, "ada")
        assert reached.limit_text == "the day budget of $1.00 per user (ada)"

    async def test_a_grant_goes_past_a_day_budget_by_its_allowance(self, redis: Redis, keys: Keys) -> None:
        await spend(redis, keys, "one", 1.2)
        limits = Limits(repository_day_usd=1.0)
        assert await check(redis, keys, limits, "now").day_reached() is not None
        granted = check(redis, keys, limits, "now", grant=Grant(extra_usd=0.5, by="ada"))
        assert await granted.day_reached() is None
        await spend(redis, keys, "now", 0.4)
        assert await granted.day_reached() is not None


class TestUnknownCost:
    async def test_a_call_of_unknown_cost_reaches_a_spend_limit(self, redis: Redis, keys: Keys) -> None:
        run_id = uuid.uuid4().hex
        await spend(redis, keys, run_id, None)
        reached = await check(redis, keys, Limits(run_usd=100.0), run_id).reached()
        assert reached is not None
        assert reached.unpriced_calls == 1
        assert "1 model call of unknown cost" in reached.spent_text

    async def test_a_continue_accepts_it_and_checks_the_known_cost(self, redis: Redis, keys: Keys) -> None:
        run_id = uuid.uuid4().hex
        await spend(redis, keys, run_id, None)
        await spend(redis, keys, run_id, 0.2)
        guard = check(redis, keys, Limits(run_usd=0.5, user_day_usd=10.0), run_id, grant=Grant(0.0, by="ada"))
        assert await guard.reached() is None
        await spend(redis, keys, run_id, 0.4)
        reached = await guard.reached()
        assert reached is not None
        assert reached.kind is LimitKind.RUN

    async def test_without_spend_limits_nothing_is_read(self, redis: Redis, keys: Keys) -> None:
        run_id = uuid.uuid4().hex
        await spend(redis, keys, run_id, None)
        assert await check(redis, keys, Limits(run_model_calls=5, active_runs=2), run_id).reached() is None
