"""Accepting a verified delivery: claim it, read what routing needs (one round trip), decide,
make the decisions durable, and only then say yes.

The order is the contract with the sender: a 2xx means every inbox message, wake and event of
the delivery was acknowledged by JetStream; anything else says it failed. Slack retries a failed
delivery by itself; GitHub only records it, and the active autofix controller asks GitHub for it
again (:mod:`drydock.channels.github.redelivery`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import structlog
from redis.exceptions import RedisError

from drydock.accounts import AccountsStore, LinkCodes, MembershipCache
from drydock.bus.envelopes import InboxMessage
from drydock.channels.intents import Delivery
from drydock.channels.outbound import Outbound
from drydock.errors import describe
from drydock.github import GithubClient
from drydock.infra.redis import BatchConnections, redis_client
from drydock.model_catalog import ModelCatalog
from drydock.runtime import Runtime
from drydock.threads.metadata import ThreadMetadataStore
from drydock.threads.pr_records import PullRequestStore
from services.ingress import routing
from services.ingress.authorize import Authorizer
from services.ingress.dedup import ClaimResult, Deliveries
from services.ingress.dispatch import Dispatcher
from services.ingress.errors import Unavailable
from services.ingress.lookup import Lookup, LookupBatch
from services.ingress.metrics import ROUTED
from services.ingress.owner_commands import OwnerCommands
from services.ingress.routing import Publish, Reply, Route, Routing, Skip

log = structlog.get_logger(__name__)

RELEASE_TIMEOUT = 2.0
"""Seconds to forget a failed delivery's claim; if Redis does not answer, the claim expires."""


@dataclass
class Accepted:
    """The answer to a delivery, and what to tell the source once it is sent."""

    status: int
    body: dict[str, Any]
    outcome: str
    acknowledge: list[InboxMessage] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)


class Ingress:
    """The ingress's state: settings, stores, routing, the dispatcher and the outbound clients."""

    def __init__(self, runtime: Runtime, outbound: Outbound, github: GithubClient | None = None) -> None:
        """``github`` answers organization-membership questions; without it only linked
        accounts and ``author_association`` can authorize a GitHub author."""
        settings = runtime.settings
        self.runtime = runtime
        self.settings = settings
        self.outbound = outbound
        # Its own client without per-command timeouts: :meth:`accept` bounds each delivery as a
        # whole, which spares redis-py's timeout per reply and task per send.
        # Its batches (the routing reads, the done marks) have connections of their own; of the
        # pool's a delivery holds at most two at once (a new thread's two writes), so the pool
        # never has to make a caller wait.
        self._own_redis = (
            redis_client(
                settings.redis,
                settings.redis.url,
                decode_responses=True,
                socket_timeout=None,
                max_connections=max(settings.redis.max_connections, 2 * settings.ingress.max_in_flight + 1),
            )
            if settings.redis.url is not None
            else None
        )
        redis = self._own_redis or runtime.redis
        self._batches = BatchConnections(redis)
        self._keys = runtime.keys
        self.deliveries = Deliveries(
            redis,
            self._batches,
            runtime.keys,
            ttl=settings.ingress.dedup_ttl,
            claim_ttl=settings.ingress.claim_ttl,
            write_timeout=settings.ingress.accept_timeout,
        )
        self.accounts = AccountsStore(redis, runtime.keys, host=settings.github.host)
        self.records = PullRequestStore(redis, runtime.keys)
        membership = MembershipCache(
            redis, runtime.keys, host=settings.github.host, ttl=settings.ingress.org_membership_ttl
        )
        self.metadata = ThreadMetadataStore(redis, runtime.keys)
        self.routing = Routing(
            self.accounts,
            self.metadata,
            LinkCodes(redis, runtime.keys, self.accounts),
            Authorizer(membership, github),
            ModelCatalog.with_extra(settings.models.extra_models),
            default_handle=settings.ingress.mention_handle,
            owner_commands=OwnerCommands.create(runtime, redis, self.metadata),
        )
        self.dispatcher = Dispatcher(runtime.bus, self.metadata, self.records, self._batches)
        self._in_flight = asyncio.Semaphore(settings.ingress.max_in_flight)
        self._deadline = settings.ingress.accept_timeout.total_seconds()
        self._routed_counters: dict[tuple[str, str, str], Any] = {}

    @classmethod
    def from_runtime(cls, runtime: Runtime) -> Ingress:
        """With outbound clients for every channel that has credentials."""
        outbound = Outbound.from_settings(runtime.settings)
        return cls(runtime, outbound, outbound.github)

    async def aclose(self) -> None:
        await self.deliveries.aclose()
        await self.outbound.aclose()
        await self._batches.aclose()
        if self._own_redis is not None:
            await self._own_redis.aclose()

    async def accept(self, delivery: Delivery) -> Accepted:
        """Route a verified delivery. Raises :class:`Unavailable` when it could not be made durable."""
        if not delivery.intents:
            return Accepted(200, {"status": "ignored", "reason": delivery.ignored or "nothing to route"}, "ignored")
        if not self.runtime.nats.is_connected:
            raise Unavailable("message bus not connected")
        channel = delivery.channel.value
        async with self._in_flight:
            try:
                # One deadline for the whole delivery: the lookup, the decisions and every publish.
                async with asyncio.timeout(self._deadline):
                    batch = LookupBatch(
                        self._batches, self._keys, self.deliveries, self.accounts, self.records, self.metadata
                    )
                    for intent in delivery.intents:
                        routing.queue_reads(batch, intent)
                    try:
                        lookup = await batch.execute(channel, delivery.delivery_id, delivery.identity)
                    except (RedisError, OSError) as error:
                        raise Unavailable(f"store: {describe(error)}") from None
                    store = self.runtime.store
                    if lookup.claim is not ClaimResult.CLAIMED or (
                        store is not None and lookup.store_epoch != store.expected
                    ):
                        answer = await self._not_routed(delivery, lookup)
                        if answer is not None:
                            return answer
                    try:
                        decisions = [await self.routing.decide(intent, lookup) for intent in delivery.intents]
                        routes = [decision for decision in decisions if isinstance(decision, Route)]
                        publishes = [decision for decision in decisions if isinstance(decision, Publish)]
                        await self.dispatcher.dispatch(routes, publishes)
                    except BaseException as error:
                        await self._release(channel, delivery.delivery_id, delivery.identity)
                        if isinstance(error, RedisError | OSError):
                            raise Unavailable(f"store: {describe(error)}") from None
                        raise
            except TimeoutError:
                raise Unavailable(f"not made durable within {self._deadline:g} s") from None
        self.deliveries.done(channel, delivery.delivery_id, delivery.identity)
        return self._accepted(delivery, decisions, routes, publishes)

    async def _not_routed(self, delivery: Delivery, lookup: Lookup) -> Accepted | None:
        """The answer to a delivery the lookup says not to route (the store lost its data, a
        duplicate, a redelivery while the first is in flight, a replay of another delivery's
        object); ``None`` to route it after all."""
        channel = delivery.channel.value
        store = self.runtime.store
        if store is not None and lookup.store_epoch != store.expected:
            lost = await store.confirm(lookup.store_epoch)
            if lost is not None:
                # Nothing read from a wiped store may decide: "not authorized" from lost settings
                # would be a 2xx the code host never retries.
                if lookup.claim is ClaimResult.CLAIMED:
                    await self._release(channel, delivery.delivery_id, delivery.identity)
                elif lookup.claim is ClaimResult.REPLAY:
                    await self._release(channel, delivery.delivery_id)
                raise Unavailable(lost)
        if lookup.claim is ClaimResult.DUPLICATE:
            return Accepted(200, {"status": "duplicate", "delivery": delivery.delivery_id}, "duplicate")
        if lookup.claim is ClaimResult.REPLAY:
            log.info(
                "replay of a delivered object under a new delivery id",
                channel=channel,
                delivery_id=delivery.delivery_id,
                identity=delivery.identity,
            )
            self.deliveries.done(channel, delivery.delivery_id)
            return Accepted(200, {"status": "duplicate", "delivery": delivery.delivery_id}, "duplicate")
        if lookup.claim is ClaimResult.IN_PROGRESS:
            log.info("redelivery while the first is in flight", channel=channel, delivery_id=delivery.delivery_id)
            return Accepted(
                503, {"error": f"delivery {delivery.delivery_id} is being processed; retry later"}, "in_progress"
            )
        return None

    async def _release(self, channel: str, delivery_id: str, identity: str | None = None) -> None:
        try:
            # Bounded on its own: it also runs after the delivery's deadline expired.
            async with asyncio.timeout(RELEASE_TIMEOUT):
                await self.deliveries.release(channel, delivery_id, identity)
        except (RedisError, OSError) as error:
            log.warning("delivery claim not released; it expires", delivery_id=delivery_id, error=describe(error))

    def _routed(self, channel: str, role: str, trigger: str) -> Any:
        key = (channel, role, trigger)
        counter = self._routed_counters.get(key)
        if counter is None:
            counter = self._routed_counters[key] = ROUTED.labels(channel, role, trigger)
        return counter

    def _accepted(
        self, delivery: Delivery, decisions: list[routing.Decision], routes: list[Route], publishes: list[Publish]
    ) -> Accepted:
        channel = delivery.channel.value
        for route in routes:
            trigger = route.message.trigger.value if route.message.trigger else "none"
            role = route.role.value
            self._routed(channel, role, trigger).inc()
            # One line for accepted and routed: a log line is dear on this path.
            log.info(
                "webhook accepted and routed",
                thread_id=route.thread_id,
                channel=channel,
                delivery_id=delivery.delivery_id,
                role=role,
                trigger=trigger,
                wakes=route.wake,
                new_thread=route.create is not None,
            )
        body: dict[str, Any] = {
            "status": "accepted" if routes or publishes else "ignored",
            "delivery": delivery.delivery_id,
            "threads": [{"thread_id": route.thread_id, "role": route.role.value} for route in routes],
        }
        replies: list[Reply] = []
        if len(decisions) > len(routes) + len(publishes):
            skipped = [decision.reason for decision in decisions if isinstance(decision, Skip)]
            for reason in skipped:
                log.info("intent not routed", channel=channel, delivery_id=delivery.delivery_id, reason=reason)
            if skipped:
                body["skipped"] = skipped
            replies = [decision for decision in decisions if isinstance(decision, Reply)]
        return Accepted(
            200,
            body,
            "accepted" if routes or publishes else "ignored",
            acknowledge=[route.message for route in routes if route.acknowledge],
            replies=replies,
        )
