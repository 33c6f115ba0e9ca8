"""The ``autofix-controller`` service: its consumer acknowledges only handled messages, and the
leading replica decides events from ``drydock.github.*``, ends repairs on run endings and
fires due wake-ups."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import pytest
from nats.aio.client import Client as NatsClient
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig
from redis.asyncio import Redis

from drydock.autofix.policy import Outcome
from drydock.bus import Bus, EventType, GithubEvent, RunEvent
from drydock.bus.consumers import Drop, DurableConsumer
from drydock.bus.streams import Subscription
from drydock.config import Settings
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.runtime import Runtime
from drydock.scheduler import Wakeups
from services.autofix_controller import service
from services.autofix_controller.serving import ControllerService, controller_service
from tests.autofix.conftest import World
from tests.waiting import eventually

T = TypeVar("T")


class PrivateStream:
    def __init__(self, bus: Bus) -> None:
        tag = uuid.uuid4().hex[:10]
        self.bus, self.stream, self.subject, self.durable = bus, f"TEST_AUTOFIX_{tag}", f"test.{tag}.github", "autofix"

    async def create(self) -> None:
        await self.bus.js.add_stream(StreamConfig(name=self.stream, subjects=[f"{self.subject}.*"]))
        await self.bus.js.add_consumer(
            self.stream,
            ConsumerConfig(
                name=self.durable, durable_name=self.durable, ack_policy=AckPolicy.EXPLICIT, ack_wait=2, max_deliver=3
            ),
        )

    async def unacknowledged(self) -> int:
        info = await self.bus.js.consumer_info(self.stream, self.durable)
        return int(info.num_pending or 0) + int(info.num_ack_pending or 0)


@pytest.fixture
async def private(bus: Bus) -> AsyncIterator[PrivateStream]:
    stream = PrivateStream(bus)
    await stream.create()
    yield stream
    await bus.js.delete_stream(stream.stream)


def github_event(delivery_id: str) -> bytes:
    return (
        GithubEvent(delivery_id=delivery_id, event="check_run", repository="acme/app", payload={})
        .model_dump_json()
        .encode()
    )


async def consume(
    private: PrivateStream, handler: Callable[[GithubEvent], Awaitable[None]]
) -> tuple[asyncio.Event, asyncio.Task[None]]:
    stop = asyncio.Event()
    subscription = Subscription(private.stream, private.durable, f"{private.subject}.{{event}}", GithubEvent, "test")
    consumer = DurableConsumer(
        subscription, handler, concurrency=4, max_deliver=3, fetch_timeout=0.2, drop_unreadable=True
    )
    return stop, asyncio.create_task(consumer.run(private.bus.nc, stop))


class TestControllerConsumer:
    async def test_every_message_is_handled_and_acknowledged(self, private: PrivateStream) -> None:
        seen: list[str] = []

        async def handler(event: GithubEvent) -> None:
            seen.append(event.delivery_id)

        for index in range(50):
            await private.bus.js.publish(f"{private.subject}.x", github_event(str(index)))
        stop, task = await consume(private, handler)
        await eventually(lambda: len(seen) == 50)
        await eventually(lambda: _zero(private))
        stop.set()
        await task
        assert sorted(int(delivery) for delivery in seen) == list(range(50))

    async def test_a_failed_handler_is_retried_and_a_drop_is_acknowledged(self, private: PrivateStream) -> None:
        attempts: dict[str, int] = {}

        async def handler(event: GithubEvent) -> None:
            attempts[event.delivery_id] = attempts.get(event.delivery_id, 0) + 1
            if event.delivery_id == "flaky" and attempts[event.delivery_id] == 1:
                raise RuntimeError("redis blinked")
            if event.delivery_id == "hopeless":
                raise Drop("no GitHub App")

        await private.bus.js.publish(f"{private.subject}.x", github_event("flaky"))
        await private.bus.js.publish(f"{private.subject}.x", github_event("hopeless"))
        await private.bus.js.publish(f"{private.subject}.x", b"not an event")
        stop, task = await consume(private, handler)
        await eventually(lambda: attempts.get("flaky") == 2)
        await eventually(lambda: _zero(private))
        stop.set()
        await task
        assert attempts == {"flaky": 2, "hopeless": 1}


async def _zero(private: PrivateStream) -> bool:
    return await private.unacknowledged() == 0


@pytest.fixture
def service_settings(autofix_settings: Settings) -> Settings:
    section = autofix_settings.autofix.model_copy(
        update={
            "lease_ttl": timedelta(seconds=1),
            "scheduler_poll": timedelta(milliseconds=100),
            "monitor_interval": timedelta(hours=1),
        }
    )
    return autofix_settings.model_copy(update={"autofix": section})


@pytest.fixture
async def leading(
    service_settings: Settings, nats_client: NatsClient, bus: Bus, redis: Redis, keys: Keys
) -> AsyncIterator[ControllerService]:
    runtime = Runtime(service_settings, nats_client, bus, redis, keys)
    async with controller_service(runtime, owner="test-replica") as controller:
        task = asyncio.create_task(controller.run())
        await eventually(lambda: controller.controller is not None)
        yield controller
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class TestControllerService:
    def test_is_registered_without_an_http_app_of_its_own(self) -> None:
        assert service.name == "autofix-controller"
        assert service.has_http is False

    async def test_the_leader_decides_github_events_ends_repairs_and_fires_wake_ups(
        self, leading: ControllerService, world: World, bus: Bus, redis: Redis, keys: Keys
    ) -> None:
        pull = await world.agent_pull()
        world.fail(pull.head_sha, "tests")

        await bus.github(world.check_run_event(pull))

        (message,) = await eventually(lambda: world.inbox(pull.thread_id))
        repair = await world.controller.repairs.active(pull.thread_id)
        assert repair is not None
        assert repair.id == message.references["autofix_repair"]
        decisions = await world.decisions(pull.thread_id)
        assert decisions[0]["outcome"] == Outcome.DISPATCH.value
        assert leading.controller is not None
        assert decisions[0]["fence"] == leading.controller.fence > 0

        await world.controller.repairs.report(pull.thread_id, "run-1", 0.3, "the test is flaky")
        await bus.emit(RunEvent(thread_id=pull.thread_id, run_id="run-1", type=EventType.COMPLETED))
        await eventually(lambda: _no_repair(world, pull.thread_id))

        await Wakeups(redis, keys).schedule(pull.thread_id, Role.CODER, datetime.now(UTC), "check CI again")
        await eventually(lambda: _has_text(world, pull.thread_id, "Scheduled wake-up: check CI again"))


async def _no_repair(world: World, thread_id: str) -> bool:
    return await world.controller.repairs.active(thread_id) is None


async def _has_text(world: World, thread_id: str, text: str) -> bool:
    return any(message.text == text for message in await world.inbox(thread_id))
