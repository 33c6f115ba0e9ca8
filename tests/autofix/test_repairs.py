"""Autofix's records in Redis: opening a repair atomically, the confidence that claims it,
its end, coalesced requests, and the per-PR overrides the dashboard reads."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from redis.asyncio import Redis

from drydock.autofix.overrides import AutofixOverrides, OverrideSource
from drydock.autofix.policy import Kind, OverrideState, Signal, Source
from drydock.autofix.repairs import OpenRefused, Repair, Repairs
from drydock.infra.redis import Keys

PULL = ("github.com", "acme/widgets", 12)
TTL = timedelta(minutes=5)


def repair(thread_id: str, head: str = "a" * 40, kind: Kind = Kind.CI, repair_id: str = "r1") -> Repair:
    return Repair(
        id=repair_id,
        thread_id=thread_id,
        host=PULL[0],
        repository=PULL[1],
        number=PULL[2],
        head_sha=head,
        kind=kind,
        threshold=0.7,
        dispatched_at=datetime.now(UTC),
        checks=("tests",),
    )


@pytest.fixture
def repairs(redis: Redis, keys: Keys) -> Repairs:
    return Repairs(redis, keys)


class TestOpen:
    async def test_records_the_repair_the_revision_and_the_count(self, repairs: Repairs, thread_id: str) -> None:
        assert await repairs.open(repair(thread_id), max_repairs=3, ttl=TTL) == 1
        active = await repairs.active(thread_id)
        assert active is not None
        assert (active.id, active.attempt, active.checks, active.push_allowed) == ("r1", 1, ("tests",), False)
        state = await repairs.state(thread_id, PULL, "a" * 40, Kind.CI)
        assert (state.repair_active, state.processed, state.repairs) == (True, True, 1)
        assert not (await repairs.state(thread_id, PULL, "a" * 40, Kind.CONFLICT)).processed

    async def test_refuses_while_a_repair_is_active_a_processed_revision_and_the_limit(
        self, repairs: Repairs, thread_id: str
    ) -> None:
        await repairs.open(repair(thread_id), max_repairs=2, ttl=TTL)
        with pytest.raises(OpenRefused, match="repair_active"):
            await repairs.open(repair(thread_id, "b" * 40, repair_id="r2"), max_repairs=2, ttl=TTL)
        assert await repairs.finish(thread_id, "r1") is not None
        with pytest.raises(OpenRefused, match="already_processed"):
            await repairs.open(repair(thread_id, repair_id="r3"), max_repairs=2, ttl=TTL)
        assert await repairs.open(repair(thread_id, "b" * 40, repair_id="r4"), max_repairs=2, ttl=TTL) == 2
        await repairs.finish(thread_id, "r4")
        with pytest.raises(OpenRefused, match="loop_limit"):
            await repairs.open(repair(thread_id, "c" * 40, repair_id="r5"), max_repairs=2, ttl=TTL)

    async def test_concurrent_opens_dispatch_once(self, repairs: Repairs, thread_id: str) -> None:
        attempts = [repair(thread_id, repair_id=f"r{i}") for i in range(20)]
        results = await asyncio.gather(
            *(repairs.open(one, max_repairs=3, ttl=TTL) for one in attempts), return_exceptions=True
        )
        assert [result for result in results if not isinstance(result, OpenRefused)] == [1]

    async def test_abandon_undoes_an_undelivered_repair(self, repairs: Repairs, thread_id: str) -> None:
        await repairs.open(repair(thread_id), max_repairs=3, ttl=TTL)
        assert await repairs.abandon(repair(thread_id))
        state = await repairs.state(thread_id, PULL, "a" * 40, Kind.CI)
        assert (state.repair_active, state.processed, state.repairs) == (False, False, 0)

    async def test_the_repair_expires_with_its_ttl(self, repairs: Repairs, thread_id: str) -> None:
        await repairs.open(repair(thread_id), max_repairs=3, ttl=timedelta(milliseconds=200))
        await asyncio.sleep(0.4)
        assert await repairs.active(thread_id) is None
        assert (await repairs.state(thread_id, PULL, "a" * 40, Kind.CI)).processed


class TestConfidence:
    async def test_a_report_claims_the_repair_for_its_run(self, repairs: Repairs, thread_id: str) -> None:
        await repairs.open(repair(thread_id), max_repairs=3, ttl=TTL)
        low = await repairs.report(thread_id, "run-1", 0.4, "flaky network in the test")
        assert low is not None
        assert (low.run_id, low.confidence, low.push_allowed) == ("run-1", 0.4, False)
        high = await repairs.report(thread_id, "run-1", 0.7, "add() subtracted; fixed")
        assert high is not None
        assert high.push_allowed
        assert high.claimed_at is not None
        assert await repairs.reported(thread_id, "run-1") == (0.7, "add() subtracted; fixed")

    async def test_without_a_repair_the_report_is_kept_for_the_run_only(self, repairs: Repairs, thread_id: str) -> None:
        assert await repairs.report(thread_id, "run-2", 0.9, "fine") is None
        assert await repairs.reported(thread_id, "run-2") == (0.9, "fine")
        assert await repairs.active(thread_id) is None

    async def test_finish_ends_only_the_named_repair(self, repairs: Repairs, thread_id: str) -> None:
        await repairs.open(repair(thread_id), max_repairs=3, ttl=TTL)
        assert await repairs.finish(thread_id, "other") is None
        ended = await repairs.finish(thread_id, "r1")
        assert ended is not None
        assert ended.id == "r1"
        assert await repairs.active(thread_id) is None


class TestPending:
    async def test_one_request_per_pull_request_the_latest_wins(self, repairs: Repairs, thread_id: str) -> None:
        first = Signal(Kind.CI, "a" * 40, Source.WEBHOOK, "d1", checks=("tests",))
        assert await repairs.hold(thread_id, PULL, first)
        assert not await repairs.hold(thread_id, PULL, first)
        latest = replace(first, head_sha="b" * 40, delivery_id="d2")
        assert await repairs.hold(thread_id, PULL, latest)
        assert list((await repairs.pending(thread_id)).values()) == [replace(latest, source=Source.PENDING)]
        taken = await repairs.take_pending(thread_id)
        assert taken == (PULL, replace(latest, source=Source.PENDING))
        assert await repairs.take_pending(thread_id) is None

    async def test_the_loop_limit_notice_is_claimed_once(self, repairs: Repairs, thread_id: str) -> None:
        assert await repairs.claim_limit_notice(thread_id, PULL)
        assert not await repairs.claim_limit_notice(thread_id, PULL)
        await repairs.release_limit_notice(thread_id, PULL)
        assert await repairs.claim_limit_notice(thread_id, PULL)
        await repairs.reset(thread_id, PULL)
        assert await repairs.claim_limit_notice(thread_id, PULL)


class TestOverrides:
    async def test_set_get_and_clear(self, redis: Redis, keys: Keys) -> None:
        overrides = AutofixOverrides(redis, keys)
        assert await overrides.get(*PULL) is None
        await overrides.set(*PULL, OverrideState.OFF, by="ada", source=OverrideSource.COMMENT)
        found = await overrides.get(*PULL)
        assert found is not None
        assert (found.state, found.by, found.source) == (OverrideState.OFF, "ada", OverrideSource.COMMENT)
        assert await overrides.get("github.com", "acme/widgets", 13) is None

    async def test_removing_a_label_clears_only_an_override_the_label_set(self, redis: Redis, keys: Keys) -> None:
        overrides = AutofixOverrides(redis, keys)
        await overrides.set(*PULL, OverrideState.ON, by="ada", source=OverrideSource.COMMENT)
        assert not await overrides.clear(*PULL, source=OverrideSource.LABEL)
        assert await overrides.get(*PULL) is not None
        await overrides.set(*PULL, OverrideState.ON, by="ada", source=OverrideSource.LABEL)
        assert await overrides.clear(*PULL, source=OverrideSource.LABEL)
        assert await overrides.get(*PULL) is None
        await overrides.set(*PULL, OverrideState.OFF, by="u1", source=OverrideSource.DASHBOARD)
        assert await overrides.clear(*PULL)
