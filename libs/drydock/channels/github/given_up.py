"""GitHub webhook deliveries the redelivery sweep gave up on, kept for administrators: the
dashboard lists them beside the dead letters and asks GitHub for one again.

Such a delivery never reached a thread (it was never routed), so it is not a dead letter of
one. GitHub keeps a delivery for three days; an older record could not be delivered again and
is dropped when the records are read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from redis.asyncio import Redis

from drydock.github.hook_deliveries import HookDeliveries, HookDelivery
from drydock.infra.redis import Keys

KEPT_BY_GITHUB = timedelta(days=3)
PAGES = ("comment", "review", "issue", "pull_request")
"""The parts of a payload whose page is shown for it, most particular first."""


@dataclass(frozen=True)
class GivenUpDelivery:
    guid: str
    """The ``X-GitHub-Delivery`` of every attempt at this delivery."""
    id: int
    """GitHub's id of the last attempt, which a redelivery request names."""
    event: str
    action: str | None
    repository_id: int | None
    status_code: int
    """The last attempt's answer; 0 when there was none."""
    delivered_at: str
    """The last attempt, ISO 8601, UTC."""
    redeliveries: int
    given_up_at: str
    repository: str | None = None
    """The repository's full name, from the payload (None when GitHub did not show it)."""
    url: str | None = None
    """The page of what the webhook was about: the comment, issue or pull request."""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> GivenUpDelivery:
        return cls(**json.loads(raw))


def asks(count: int, at: datetime | None = None) -> str:
    """The value of ``Keys.redelivery(guid)``: how many times the sweep asked GitHub for the
    delivery again, and when last (``COUNT EPOCH``; a bare count once it is given up)."""
    return f"{count} {at.timestamp()}" if at is not None else str(count)


def read_asks(value: str | None) -> tuple[int, datetime | None]:
    """The count and the time of :func:`asks`' value (0 and None for no key)."""
    if value is None:
        return 0, None
    count, _, at = value.partition(" ")
    return int(count), datetime.fromtimestamp(float(at), UTC) if at else None


class GivenUpDeliveries:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def record(
        self, last: HookDelivery, redeliveries: int, *, at: datetime, payload: Mapping[str, Any] | None = None
    ) -> None:
        """Keep ``last``, the final failed attempt, with where its ``payload`` points; the sweep's
        count for it is set past the attempts in the same transaction, so the sweep reports it once."""
        given_up = GivenUpDelivery(
            guid=last.guid,
            id=last.id,
            event=last.event,
            action=last.action,
            repository_id=last.repository_id,
            status_code=last.status_code,
            delivered_at=last.delivered_at.astimezone(UTC).isoformat(),
            redeliveries=redeliveries,
            given_up_at=at.astimezone(UTC).isoformat(),
            repository=_text(payload, "repository", "full_name"),
            url=_page(payload),
        )
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(self._keys.redelivery(last.guid), asks(redeliveries + 1), ex=KEPT_BY_GITHUB)
            pipe.hset(self._keys.deliveries_given_up(), last.guid, given_up.to_json())
            await pipe.execute()
        # Pruned here too, so that the records stay bounded however seldom they are read.
        await self._kept(at)

    async def all(self, *, now: datetime | None = None) -> list[GivenUpDelivery]:
        """Every delivery GitHub still keeps, the last given up first; older records are dropped."""
        kept = await self._kept(now or datetime.now(UTC))
        return sorted(kept, key=lambda record: record.given_up_at, reverse=True)

    async def _kept(self, now: datetime) -> list[GivenUpDelivery]:
        raws = cast(dict[str, str], await self._redis.hgetall(self._keys.deliveries_given_up()))
        records = [GivenUpDelivery.from_json(raw) for raw in raws.values()]
        gone = {record.guid for record in records if datetime.fromisoformat(record.delivered_at) < now - KEPT_BY_GITHUB}
        if gone:
            await self._redis.hdel(self._keys.deliveries_given_up(), *gone)
        return [record for record in records if record.guid not in gone]

    async def get(self, guid: str) -> GivenUpDelivery | None:
        raw = cast(str | None, await self._redis.hget(self._keys.deliveries_given_up(), guid))
        return None if raw is None else GivenUpDelivery.from_json(raw)

    async def redeliver(
        self, given_up: GivenUpDelivery, github: HookDeliveries, *, now: datetime | None = None
    ) -> None:
        """Ask GitHub for the delivery again (:class:`~drydock.errors.OutboundFailed` if it
        refuses) and hand it back to the sweep with its attempts renewed, should this one fail too;
        the sweep's first ask waits its pause after this one."""
        await github.redeliver(given_up.id)
        asked = now or datetime.now(UTC)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hdel(self._keys.deliveries_given_up(), given_up.guid)
            pipe.set(self._keys.redelivery(given_up.guid), asks(0, asked), ex=KEPT_BY_GITHUB)
            await pipe.execute()

    async def forget(self, guid: str) -> None:
        """Drop the record and the sweep's count of the delivery's redeliveries."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hdel(self._keys.deliveries_given_up(), guid)
            pipe.delete(self._keys.redelivery(guid))
            await pipe.execute()


def _text(payload: Mapping[str, Any] | None, part: str, field: str) -> str | None:
    found = (payload or {}).get(part)
    value = found.get(field) if isinstance(found, dict) else None
    return value if isinstance(value, str) else None


def _page(payload: Mapping[str, Any] | None) -> str | None:
    """The first web page among :data:`PAGES`; only an http(s) address, as the dashboard links it."""
    for part in PAGES:
        url = _text(payload, part, "html_url")
        if url is not None and url.startswith(("https://", "http://")):
            return url
    return None
