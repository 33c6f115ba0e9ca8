"""The durable pull consumer on FastStream: what reaches a handler, in memory
(``TestNatsBroker``); what is settled how, and the shared connection, on the real server (the
wake consumer's and the controller's tests cover redelivery, heartbeats and dead letters)."""

from __future__ import annotations

import asyncio

import pytest
from faststream.nats import TestNatsBroker

from drydock.bus import Bus, Wake
from drydock.bus.consumers import DurableConsumer, SharedConnectionBroker, serve
from drydock.bus.streams import run_subscription
from drydock.roles import Role


def in_memory(consumer: DurableConsumer[Wake]) -> SharedConnectionBroker:
    broker = SharedConnectionBroker()
    broker.include_router(consumer.router())
    return broker


class TestInMemory:
    async def test_a_wake_reaches_the_handler_as_its_envelope(self) -> None:
        seen: list[Wake] = []

        async def handler(wake: Wake) -> None:
            seen.append(wake)

        consumer = DurableConsumer(run_subscription(Role.CODER), handler, concurrency=1, max_deliver=3)
        async with TestNatsBroker(in_memory(consumer)) as broker:
            await broker.publish(Wake(thread_id="t-1", role=Role.CODER), "drydock.run.coder.t-1", stream="DRYDOCK_RUNS")
        assert [(wake.thread_id, wake.role) for wake in seen] == [("t-1", Role.CODER)]

    async def test_an_unreadable_message_never_reaches_the_handler(self) -> None:
        seen: list[Wake] = []

        async def handler(wake: Wake) -> None:
            seen.append(wake)

        consumer = DurableConsumer(run_subscription(Role.CODER), handler, concurrency=1, max_deliver=3)
        async with TestNatsBroker(in_memory(consumer)) as broker:
            await broker.publish(b"not a wake", "drydock.run.coder.t-1", stream="DRYDOCK_RUNS")
            await broker.publish({"thread_id": "t-2"}, "drydock.run.coder.t-2", stream="DRYDOCK_RUNS")
        assert seen == []

    async def test_one_subscriber_binds_the_durable_consumer_under_the_user_s_inbox(self, bus: Bus) -> None:
        async def handler(wake: Wake) -> None:
            raise AssertionError("never called")

        consumer = DurableConsumer(run_subscription(Role.REVIEWER), handler, concurrency=3, max_deliver=3)
        [subscriber] = consumer.router(bus.nc).subscribers
        prefix = bus.nc.new_inbox().rsplit(".", 1)[0].encode() + b"."
        options = subscriber.extra_options  # type: ignore[attr-defined]
        assert (options["stream"], options["durable"], options["inbox_prefix"]) == (
            "DRYDOCK_RUNS", "run-reviewer", prefix,
        )  # fmt: skip


class TestSharedConnection:
    async def test_stopping_leaves_the_bus_connection_open(self, bus: Bus) -> None:
        async def handler(wake: Wake) -> None:
            raise AssertionError("never called")

        consumer = DurableConsumer(run_subscription(Role.ANALYZER), handler, concurrency=2, max_deliver=3)
        stop = asyncio.Event()
        serving = asyncio.create_task(serve(bus.nc, consumer, stop=stop))
        await asyncio.sleep(0.2)
        stop.set()
        await asyncio.wait_for(serving, 10)
        assert bus.nc.is_connected
        await bus.js.stream_info("DRYDOCK_RUNS")

    async def test_concurrency_must_be_positive(self) -> None:
        async def handler(wake: Wake) -> None:
            raise AssertionError("never called")

        with pytest.raises(ValueError, match="concurrency"):
            DurableConsumer(run_subscription(Role.CODER), handler, concurrency=0, max_deliver=3)
