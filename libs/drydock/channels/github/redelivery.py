"""Failed GitHub webhook deliveries, asked for again.

GitHub records a delivery the ingress did not answer 2xx (a 503 while NATS or Redis was down,
a timeout, a refused connection) as failed and never sends it again by itself. The active
autofix controller therefore reads the App's recent delivery attempts every
``redeliver_interval`` and asks GitHub to redeliver each delivery (by its ``guid``, which a
redelivery keeps) that has no successful attempt, whose last attempt failed for a reason a retry
can mend (no answer, 408, 429, 5xx; the ingress's other 4xx answer the payload itself) and that
the ingress has not recorded as done. Each delivery is asked for at most ``redeliver_attempts``
times, the pauses doubling from the interval up to :data:`MAX_PAUSE`, so an outage of hours is
covered and a delivery that keeps failing ends with one error line and a record administrators
see on the dashboard's dead-letters page, from which they may ask for it again
(:mod:`drydock.channels.github.given_up`).

GitHub lists attempts newest first without a date filter, so each sweep reads back to a mark in
Redis: the start of the previous sweep, or the last attempt of a delivery still failing (waiting
for its turn, or asked for and not carried out yet), whichever is older, less :data:`OVERLAP`.
A pause runs from the later of the last attempt and the last ask, so an ask GitHub has not
carried out yet is not made again before its turn. A redelivery that reaches the ingress twice
is answered as the duplicate it is.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import structlog
from prometheus_client import Counter
from redis.asyncio import Redis
from redis.exceptions import RedisError

from drydock.bus.envelopes import Channel
from drydock.channels.github.given_up import KEPT_BY_GITHUB, GivenUpDeliveries, asks, read_asks
from drydock.channels.intents import DELIVERY_DONE
from drydock.config import GithubSettings
from drydock.errors import OutboundFailed, describe
from drydock.github.hook_deliveries import HookDeliveries, HookDelivery
from drydock.infra.redis import Keys
from drydock.telemetry import REGISTRY

log = structlog.get_logger(__name__)

OVERLAP = timedelta(minutes=1)
"""Read back this far before the mark: an attempt is listed once it ended (up to GitHub's 10 s
timeout after its ``delivered_at``), and GitHub's clock is not ours. Every sweep reads the
attempts of the last interval and this again: one API request per 100 of them."""
MAX_PAUSE = timedelta(hours=1)
LISTED_AT_MOST = 10_000
"""Attempts read per sweep at most (100 pages); older ones are left, with a warning."""
RETRYABLE = frozenset({0, 408, 429})
REDELIVERIES = Counter(
    "drydock_github_redeliveries",
    "Failed GitHub webhook deliveries by what the sweep did: asked (GitHub took the request), refused "
    "(it did not), given_up (still failing after every attempt).",
    ["outcome"],
    registry=REGISTRY,
)


def retryable(status_code: int) -> bool:
    return status_code in RETRYABLE or status_code >= 500


@dataclass
class Sweep:
    """What one sweep did, by delivery ``guid``."""

    asked: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    """Failed, but their pause before the next ask has not passed (or the ingress holds them)."""
    given_up: list[str] = field(default_factory=list)


class Redeliveries:
    def __init__(self, github: HookDeliveries, redis: Redis, keys: Keys, settings: GithubSettings) -> None:
        self._github = github
        self._redis = redis
        self._keys = keys
        self._attempts = settings.redeliver_attempts
        self._interval = settings.redeliver_interval
        self._max_age = settings.redeliver_max_age
        self._records = GivenUpDeliveries(redis, keys)

    def pause(self, asked: int) -> timedelta:
        """How long after a delivery's last failed attempt it is asked for again, having been asked ``asked`` times."""
        return min(self._interval * (1 << asked), MAX_PAUSE)

    async def sweep(self, now: datetime | None = None) -> Sweep:
        now = now or datetime.now(UTC)
        since = now - self._max_age
        mark = await self._redis.get(self._keys.redeliveries_swept())
        if mark is not None:
            since = max(since, datetime.fromtimestamp(float(mark), UTC) - OVERLAP)
        attempts = await self._github.hook_deliveries(since, limit=LISTED_AT_MOST)
        if len(attempts) == LISTED_AT_MOST:
            log.warning(
                "GitHub lists more delivery attempts than one sweep reads; older failures are not looked at",
                read=LISTED_AT_MOST,
                oldest=attempts[-1].delivered_at.isoformat(),
            )
        failed = _failed(attempts)
        sweep = Sweep()
        held: list[datetime] = []
        if failed:
            guids = list(failed)
            # One round trip: the ingress's record of each delivery, then the times it was asked for.
            found = await self._redis.mget(
                [self._keys.delivery(Channel.GITHUB.value, guid) for guid in guids]
                + [self._keys.redelivery(guid) for guid in guids]
            )
            recorded, asked = found[: len(guids)], cast(list[str | None], found[len(guids) :])
            for guid, seen, times in zip(guids, recorded, asked, strict=True):
                last = failed[guid]
                if seen == DELIVERY_DONE:
                    continue
                count, asked_at = read_asks(times)
                if count >= self._attempts:
                    if count == self._attempts:
                        await self._give_up(last, count, now)
                        sweep.given_up.append(guid)
                    continue
                # From the ask too: GitHub may not have carried it out yet, and the failed
                # attempt it would replace can be hours old.
                since = max(last.delivered_at, asked_at) if asked_at else last.delivered_at
                if seen is not None or now - since < self.pause(count):
                    sweep.waiting.append(guid)
                elif await self._ask(last, count, now):
                    sweep.asked.append(guid)
                # Read back to it until it succeeds: an ask GitHub took may never be carried out.
                held.append(last.delivered_at)
        await self._redis.set(self._keys.redeliveries_swept(), min([now, *held]).timestamp())
        return sweep

    async def _ask(self, last: HookDelivery, count: int, now: datetime) -> bool:
        try:
            await self._github.redeliver(last.id)
        except OutboundFailed as error:
            REDELIVERIES.labels("refused").inc()
            _about(last).warning("GitHub did not take a redelivery request", error=describe(error))
            return False
        await self._redis.set(self._keys.redelivery(last.guid), asks(count + 1, now), ex=KEPT_BY_GITHUB)
        REDELIVERIES.labels("asked").inc()
        _about(last).info("failed webhook delivery asked for again", attempt=count + 1)
        return True

    async def _give_up(self, last: HookDelivery, count: int, now: datetime) -> None:
        try:
            payload = await self._github.delivered_payload(last.id)
        except OutboundFailed as error:
            payload = None
            _about(last).warning("the payload of a delivery given up could not be read", error=describe(error))
        await self._records.record(last, count, at=now, payload=payload)
        REDELIVERIES.labels("given_up").inc()
        _about(last).error(
            "webhook delivery still failing after every redelivery; it is not asked for again", redeliveries=count
        )

    async def run_forever(self, *, stop: asyncio.Event) -> None:
        """Sweep every ``redeliver_interval`` until ``stop`` is set (checked each round, since
        redis-py can swallow a cancellation mid-command)."""
        while not stop.is_set():
            try:
                await self.sweep()
            except (RedisError, OSError) as error:
                log.warning("failed webhook deliveries not swept: Redis unavailable", error=describe(error))
            except OutboundFailed as error:
                log.warning("failed webhook deliveries not swept: GitHub unavailable", error=describe(error))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self._interval.total_seconds())


def _about(last: HookDelivery) -> Any:
    return log.bind(guid=last.guid, github_event=last.event, status_code=last.status_code)


def _failed(attempts: list[HookDelivery]) -> dict[str, HookDelivery]:
    """The last attempt of each delivery that has no successful attempt and may succeed on a retry."""
    succeeded = {attempt.guid for attempt in attempts if attempt.succeeded}
    last: dict[str, HookDelivery] = {}
    for attempt in attempts:
        if attempt.guid not in succeeded and attempt.guid not in last:
            last[attempt.guid] = attempt
    return {guid: attempt for guid, attempt in last.items() if retryable(attempt.status_code)}
