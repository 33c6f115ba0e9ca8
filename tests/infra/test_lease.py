"""The fenced lease that the per-thread lease and the autofix controller's leadership share."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
import structlog
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from drydock.infra.lease import FencedLeases, keep_renewed, token
from drydock.infra.redis import Keys

TTL = timedelta(milliseconds=600)
# Long enough that the margin before expiry (a sixth of it) absorbs a loaded machine's delays.
TIMED_TTL = timedelta(milliseconds=1500)
log = structlog.stdlib.get_logger(__name__)


@pytest.fixture
def leases(redis: Redis) -> FencedLeases:
    return FencedLeases(redis, ttl=TTL)


@pytest.fixture
def lease_keys(keys: Keys) -> tuple[str, str]:
    return f"{keys.prefix}:lease:{{shared}}", f"{keys.prefix}:lease-fence:{{shared}}"


class TestFencedLeases:
    async def test_one_of_many_acquirers_holds_it(self, leases: FencedLeases, lease_keys: tuple[str, str]) -> None:
        fences = await asyncio.gather(*(leases.acquire(*lease_keys, f"owner-{i}") for i in range(50)))
        assert len([fence for fence in fences if fence is not None]) == 1

    async def test_every_acquisition_has_a_higher_fence(
        self, leases: FencedLeases, redis: Redis, lease_keys: tuple[str, str]
    ) -> None:
        key, _ = lease_keys
        first = await leases.acquire(*lease_keys, "a")
        assert first is not None
        assert await redis.get(key) == token("a", first)
        assert await leases.release(key, token("a", first))
        second = await leases.acquire(*lease_keys, "b")
        assert second is not None
        assert second > first

    async def test_a_stale_holder_can_neither_renew_nor_release(
        self, leases: FencedLeases, redis: Redis, lease_keys: tuple[str, str]
    ) -> None:
        key, _ = lease_keys
        stale = await leases.acquire(*lease_keys, "a")
        assert stale is not None
        await asyncio.sleep(TTL.total_seconds() + 0.1)
        fresh = await leases.acquire(*lease_keys, "b")
        assert fresh is not None
        assert not await leases.renew(key, token("a", stale))
        assert not await leases.release(key, token("a", stale))
        assert await redis.get(key) == token("b", fresh)

    async def test_renewal_extends_the_ttl(
        self, leases: FencedLeases, redis: Redis, lease_keys: tuple[str, str]
    ) -> None:
        key, _ = lease_keys
        fence = await leases.acquire(*lease_keys, "a")
        assert fence is not None
        await asyncio.sleep(TTL.total_seconds() / 2)
        assert await leases.renew(key, token("a", fence))
        assert await redis.pttl(key) > TTL.total_seconds() * 1000 * 0.7

    async def test_owner_names_cannot_forge_tokens(self, leases: FencedLeases, lease_keys: tuple[str, str]) -> None:
        with pytest.raises(ValueError, match="owner"):
            await leases.acquire(*lease_keys, "a|1")


class TestKeepRenewed:
    async def test_keeps_the_lease_past_its_ttl_until_it_is_taken(
        self, leases: FencedLeases, redis: Redis, lease_keys: tuple[str, str]
    ) -> None:
        key, _ = lease_keys
        fence = await leases.acquire(*lease_keys, "a")
        assert fence is not None
        renewer = asyncio.create_task(keep_renewed(lambda: leases.renew(key, token("a", fence)), TTL, log))
        await asyncio.sleep(TTL.total_seconds() * 2.5)
        assert not renewer.done()
        assert await redis.get(key) == token("a", fence)

        await redis.set(key, "thief|999", px=5000)
        loop = asyncio.get_running_loop()
        taken_at = loop.time()
        await asyncio.wait_for(renewer, TTL.total_seconds() * 2)
        assert loop.time() - taken_at < TTL.total_seconds(), "noticed at the next renewal"

    async def test_a_renewal_that_never_answers_ends_before_the_ttl(self) -> None:
        async def silent() -> bool:
            await asyncio.Event().wait()
            return True

        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.wait_for(keep_renewed(silent, TIMED_TTL, log), TIMED_TTL.total_seconds() * 3)
        assert loop.time() - started < TIMED_TTL.total_seconds(), "the holder stops before the lease expires"

    async def test_failing_renewals_are_retried_until_just_before_the_ttl(self) -> None:
        calls = 0

        async def unreachable() -> bool:
            nonlocal calls
            calls += 1
            raise RedisConnectionError("connection refused")

        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.wait_for(keep_renewed(unreachable, TIMED_TTL, log), TIMED_TTL.total_seconds() * 3)
        assert loop.time() - started < TIMED_TTL.total_seconds(), "the holder stops before the lease expires"
        assert calls > 1, "a failed renewal is retried while the lease is still valid"

    async def test_a_failed_renewal_followed_by_a_good_one_keeps_the_lease(self) -> None:
        answers = [RedisConnectionError("blip")]

        async def flaky() -> bool:
            if answers:
                raise answers.pop()
            return True

        renewer = asyncio.create_task(keep_renewed(flaky, TTL, log))
        await asyncio.sleep(TTL.total_seconds() * 2)
        assert not renewer.done()
        renewer.cancel()
        await asyncio.wait([renewer])
