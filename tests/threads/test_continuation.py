"""Pausing a thread at a budget and continuing it: what counts as a continue, one allowance per
pause however many continues arrive, and the grant taken by one run only."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from drydock.budgets import Grant, LimitKind, Reached
from drydock.infra.redis import Keys
from drydock.threads.continuation import Continuations, asks_to_continue, grant_for

RUN_LIMIT = Reached(LimitKind.RUN, limit_usd=1.0, spent_usd=1.2)
DAY_BUDGET = Reached(LimitKind.REPOSITORY_DAY, limit_usd=5.0, spent_usd=5.1, subject="acme/widgets")


class TestAsksToContinue:
    def test_the_whole_message_is_the_command(self) -> None:
        for text in (
            "@drydock continue",
            "  @Drydock CONTINUE. ",
            "<@U0BOT> continue",
            "continue!",
            "@drydock, continue",
        ):
            assert asks_to_continue(text, "@drydock"), text

    def test_a_sentence_with_the_word_is_not(self) -> None:
        for text in ("@drydock continue with the tests", "please continue", "@other continue", "continued"):
            assert not asks_to_continue(text, "@drydock"), text

    def test_the_slack_button(self) -> None:
        assert asks_to_continue("[pressed drydock_continue] continue", "@drydock")
        assert not asks_to_continue("[pressed something_else] continue", "@drydock")


class TestGrants:
    def test_a_run_limit_needs_no_extra_allowance(self) -> None:
        assert grant_for(RUN_LIMIT, 1.0, "ada") == Grant(extra_usd=0.0, by="ada")

    def test_a_day_budget_gets_one_run_more(self) -> None:
        assert grant_for(DAY_BUDGET, 1.0, "ada") == Grant(extra_usd=1.0, by="ada")
        assert grant_for(DAY_BUDGET, None, "ada") == Grant(extra_usd=5.0, by="ada")


class TestContinuations:
    async def test_a_pause_is_continued_once(self, redis: Redis, keys: Keys, thread_id: str) -> None:
        store = Continuations(redis, keys)
        await store.pause(thread_id, RUN_LIMIT)
        assert await store.paused(thread_id) == RUN_LIMIT
        results = await asyncio.gather(*(store.resume(thread_id, Grant(0.0, by=f"p{i}")) for i in range(5)))
        assert sorted(results) == [False, False, False, False, True]
        assert await store.paused(thread_id) is None
        assert await store.take_grant(thread_id) is not None
        assert await store.take_grant(thread_id) is None

    async def test_nothing_to_continue_when_not_paused(self, redis: Redis, keys: Keys, thread_id: str) -> None:
        store = Continuations(redis, keys)
        assert not await store.resume(thread_id, Grant(0.0, by="ada"))
        assert await store.take_grant(thread_id) is None

    async def test_a_day_budget_pause_ends_with_the_day(self, redis: Redis, keys: Keys, thread_id: str) -> None:
        store = Continuations(redis, keys)
        await store.pause(thread_id, DAY_BUDGET)
        ttl = await redis.pttl(keys.budget_pause(thread_id))
        assert 0 < ttl <= 86_400_000


class TestPausedOrTakeGrant:
    async def test_a_paused_thread_answers_its_pause_and_keeps_any_grant(
        self, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        store = Continuations(redis, keys)
        await store.pause(thread_id, DAY_BUDGET)
        await redis.set(keys.budget_grant(thread_id), Grant(1.0, by="ada").to_json())
        assert await store.paused_or_take_grant(thread_id) == DAY_BUDGET
        assert await store.take_grant(thread_id) == Grant(1.0, by="ada")

    async def test_a_continued_thread_s_grant_is_taken_once(self, redis: Redis, keys: Keys, thread_id: str) -> None:
        store = Continuations(redis, keys)
        await store.pause(thread_id, DAY_BUDGET)
        assert await store.resume(thread_id, Grant(2.0, by="ada"))
        assert await store.paused_or_take_grant(thread_id) == Grant(2.0, by="ada")
        assert await store.paused_or_take_grant(thread_id) is None

    async def test_neither(self, redis: Redis, keys: Keys, thread_id: str) -> None:
        assert await Continuations(redis, keys).paused_or_take_grant(thread_id) is None
