from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from nats.js.api import RawStreamMsg
from nats.js.errors import NotFoundError
from opentelemetry import trace
from opentelemetry.trace import SpanContext, SpanKind
from redis.asyncio import Redis

from drydock.bus import Bus, EventType, RunEvent, Wake
from drydock.bus.envelopes import Channel, InboxMessage, ReplyAddress
from drydock.bus.streams import EVENTS_STREAM
from drydock.channels.outbound import Outbound
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.telemetry import REGISTRY
from drydock.threads.fields import REPLY_TO
from drydock.threads.metadata import ThreadMetadataStore
from drydock.worker import WakeConsumer, WakeHandler
from drydock.worker.dead_letters import DeadLetterOffice, DeadLetters
from tests.telemetry.spans import attribute, named, parent_id, recorded_spans, span_id, trace_id
from tests.waiting import eventually
from tests.worker.conftest import WakeQueue


class RecordingReplies:
    """The source channel of the dead-letter tests: records what is posted there."""

    def __init__(self) -> None:
        self.posted: list[tuple[dict[str, str], str]] = []

    async def reply(self, address: ReplyAddress, text: str, *, effect: str | None = None) -> None:
        self.posted.append((address.address, text))

    async def find_reply(self, address: ReplyAddress, effect: str) -> bool:
        return False

    async def acknowledge(self, message: InboxMessage) -> bool:
        return False


@contextlib.asynccontextmanager
async def consuming(
    queue: WakeQueue,
    handler: WakeHandler,
    *,
    concurrency: int = 4,
    office: DeadLetterOffice | None = None,
    heartbeat: float | None = None,
) -> AsyncIterator[WakeConsumer]:
    consumer = WakeConsumer(
        queue.bus,
        Role.CODER,
        handler,
        dead_letters=office or DeadLetterOffice(queue.bus, queue.redis, queue.keys, Outbound({}, {}, [])),
        concurrency=concurrency,
        heartbeat=heartbeat or queue.ack_wait / 4,
        max_deliver=queue.max_deliver,
        fetch_timeout=0.2,
        stream=queue.stream,
        durable=queue.durable,
    )
    task = asyncio.create_task(consumer.run())
    try:
        yield consumer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def new_thread() -> str:
    return str(uuid.uuid4())


class TestDelivery:
    async def test_a_handled_wake_is_acknowledged(self, wake_queue: WakeQueue) -> None:
        seen: list[Wake] = []

        async def handler(wake: Wake) -> None:
            seen.append(wake)

        thread = new_thread()
        async with consuming(wake_queue, handler):
            await wake_queue.wake(thread)

            async def done() -> bool:
                return bool(seen) and await wake_queue.pending() == 0

            await eventually(done)
        assert [wake.thread_id for wake in seen] == [thread]

    async def test_heartbeats_keep_a_run_longer_than_the_ack_wait(self, wake_queue: WakeQueue) -> None:
        calls: Counter[str] = Counter()

        async def slow(wake: Wake) -> None:
            calls[wake.thread_id] += 1
            await asyncio.sleep(wake_queue.ack_wait * 2.5)

        thread = new_thread()
        async with consuming(wake_queue, slow):
            await wake_queue.wake(thread)

            async def done() -> bool:
                return calls[thread] == 1 and await wake_queue.pending() == 0

            await eventually(done)
            await asyncio.sleep(wake_queue.ack_wait)
        assert calls[thread] == 1

    async def test_runs_in_parallel_up_to_the_bound(self, wake_queue: WakeQueue) -> None:
        running, most, finished = 0, 0, 0

        async def handler(wake: Wake) -> None:
            nonlocal running, most, finished
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.2)
            running -= 1
            finished += 1

        async with consuming(wake_queue, handler, concurrency=2):
            for _ in range(6):
                await wake_queue.wake(new_thread())

            async def done() -> bool:
                return finished == 6

            await eventually(done)
        assert most == 2

    async def test_a_busy_consumer_takes_no_wake_it_cannot_start(self, wake_queue: WakeQueue) -> None:
        started: list[str] = []
        release = asyncio.Event()

        async def handler(wake: Wake) -> None:
            started.append(wake.thread_id)
            await release.wait()

        async with consuming(wake_queue, handler, concurrency=2):
            for _ in range(4):
                await wake_queue.wake(new_thread())
            await eventually(lambda: len(started) == 2, what="two runs started")
            # Several fetch timeouts: a wake taken while both places are busy would show here.
            await asyncio.sleep(1.0)
            info = await wake_queue.bus.js.consumer_info(wake_queue.stream, wake_queue.durable)
            assert (info.num_ack_pending, info.num_pending, len(started)) == (2, 2, 2)
            release.set()
            await eventually(lambda: len(started) == 4, what="the other two runs started")

            async def drained() -> bool:
                return await wake_queue.pending() == 0

            await eventually(drained, what="every wake acknowledged")

    async def test_an_idle_consumer_keeps_one_pull_request_waiting_whatever_its_concurrency(
        self, wake_queue: WakeQueue
    ) -> None:
        async def handler(wake: Wake) -> None:
            raise AssertionError("no wake was published")

        async with consuming(wake_queue, handler, concurrency=8):

            async def waiting() -> int:
                info = await wake_queue.bus.js.consumer_info(wake_queue.stream, wake_queue.durable)
                return int(info.num_waiting or 0)

            await eventually(waiting, what="a pull request waiting")
            seen = set()
            for _ in range(10):
                seen.add(await waiting())
                await asyncio.sleep(0.1)
        # One subscriber per place kept eight waiting.
        assert seen <= {0, 1}


class TestFailures:
    async def test_a_failing_run_is_redelivered_then_recorded_on_the_thread(
        self, wake_queue: WakeQueue, bus: Bus
    ) -> None:
        attempts: Counter[str] = Counter()

        async def failing(wake: Wake) -> None:
            attempts[wake.thread_id] += 1
            raise RuntimeError("sandbox exploded")

        thread = new_thread()
        async with consuming(wake_queue, failing):
            await wake_queue.wake(thread)

            async def gave_up() -> bool:
                return attempts[thread] == wake_queue.max_deliver and await wake_queue.pending() == 0

            await eventually(gave_up, within=15)

            # The wake is terminated before its failure is recorded, so the event can trail it.
            async def recorded_error() -> RawStreamMsg | None:
                with contextlib.suppress(NotFoundError):
                    return await bus.js.get_msg(EVENTS_STREAM, subject=f"drydock.event.{thread}.error")
                return None

            event = await eventually(recorded_error, within=15, what="the error event")
        assert event.data is not None
        recorded = RunEvent.model_validate_json(event.data)
        assert recorded.type is EventType.ERROR
        assert recorded.data["gave_up"] is True
        assert "sandbox exploded" in recorded.data["error"]

    async def test_an_unreadable_wake_is_dropped_not_retried(self, wake_queue: WakeQueue) -> None:
        seen: list[Wake] = []

        async def handler(wake: Wake) -> None:
            seen.append(wake)

        async with consuming(wake_queue, handler):
            await wake_queue.bus.js.publish(f"{wake_queue.prefix}.coder.x", b"not json")

            async def drained() -> bool:
                return await wake_queue.pending() == 0

            await eventually(drained)
        assert seen == []


class TestDeadLetters:
    """A wake that used up its deliveries is never lost silently: a record for the dashboard,
    an error event on the thread and a notice in its source conversation."""

    async def source(self, queue: WakeQueue, thread: str) -> tuple[DeadLetterOffice, RecordingReplies]:
        address = ReplyAddress(channel=Channel.SLACK, address={"channel": "C1", "thread_ts": "1.0"})
        await ThreadMetadataStore(queue.redis, queue.keys).create(
            thread, kind=Role.CODER, fields={REPLY_TO: address.model_dump_json()}
        )
        replies = RecordingReplies()
        office = DeadLetterOffice(queue.bus, queue.redis, queue.keys, Outbound({Channel.SLACK: replies}, {}, []))
        return office, replies

    async def test_a_handler_that_always_fails_leaves_a_dead_letter(self, wake_queue: WakeQueue, bus: Bus) -> None:
        thread = new_thread()
        office, replies = await self.source(wake_queue, thread)

        async def failing(wake: Wake) -> None:
            raise RuntimeError("sandbox exploded")

        letters = DeadLetters(wake_queue.redis, wake_queue.keys)
        counted = REGISTRY.get_sample_value("drydock_dead_letters_total", {"role": "coder"}) or 0
        async with consuming(wake_queue, failing, office=office):
            await wake_queue.wake(thread)

            async def buried() -> bool:
                return bool(await letters.all()) and bool(replies.posted)

            await eventually(buried, within=15)
        [letter] = await letters.all()
        assert (letter.thread_id, letter.role, letter.deliveries) == (thread, "coder", wake_queue.max_deliver)
        assert "sandbox exploded" in letter.error
        [(_, notice)] = replies.posted
        assert notice.startswith(f"I could not finish this after {wake_queue.max_deliver} attempts;")
        event = await bus.js.get_msg(EVENTS_STREAM, subject=f"drydock.event.{thread}.error")
        assert RunEvent.model_validate_json(event.data or b"").data["dead_letter"] == letter.id
        assert REGISTRY.get_sample_value("drydock_dead_letters_total", {"role": "coder"}) == counted + 1

    async def test_a_wake_whose_worker_dies_on_every_delivery_is_buried_from_the_advisory(
        self, wake_queue: WakeQueue
    ) -> None:
        thread = new_thread()
        office, replies = await self.source(wake_queue, thread)
        deliveries: Counter[str] = Counter()

        async def hangs_without_heartbeats(wake: Wake) -> None:
            deliveries[wake.thread_id] += 1
            await asyncio.sleep(3600)

        letters = DeadLetters(wake_queue.redis, wake_queue.keys)
        async with consuming(wake_queue, hangs_without_heartbeats, office=office, heartbeat=3600):
            await wake_queue.wake(thread)

            async def buried() -> bool:
                # The source is told after the letter is stored: wait for both.
                return bool(await letters.all()) and await wake_queue.pending() == 0 and len(replies.posted) > 0

            await eventually(buried, within=20)
        [letter] = await letters.all()
        assert deliveries[thread] == wake_queue.max_deliver
        assert "every delivery ended without an answer" in letter.error
        assert len(replies.posted) == 1

    async def test_an_administrator_s_retry_wakes_the_thread_again(self, wake_queue: WakeQueue) -> None:
        thread = new_thread()
        office, _ = await self.source(wake_queue, thread)
        attempts: Counter[str] = Counter()

        async def fails_until_retried(wake: Wake) -> None:
            attempts[wake.reason] += 1
            if wake.reason != "retry":
                raise RuntimeError("model provider down")

        letters = DeadLetters(wake_queue.redis, wake_queue.keys)
        async with consuming(wake_queue, fails_until_retried, office=office):
            await wake_queue.wake(thread)

            async def buried() -> bool:
                return bool(await letters.all())

            await eventually(buried, within=15)
            [letter] = await letters.all()
            retried = await letters.retry(letter.id, wake_queue.bus, subject=wake_queue.subject(thread))

            async def handled() -> bool:
                return attempts["retry"] == 1 and await wake_queue.pending() == 0

            await eventually(handled)
        assert retried == letter
        assert await letters.all() == []


class TestShutdown:
    async def test_unfinished_wakes_are_handed_back_at_once(self, wake_queue: WakeQueue) -> None:
        started = asyncio.Event()

        async def never_finishes(wake: Wake) -> None:
            started.set()
            await asyncio.sleep(3600)

        thread = new_thread()
        async with consuming(wake_queue, never_finishes):
            await wake_queue.wake(thread)
            await asyncio.wait_for(started.wait(), 10)

        taken_over: list[Wake] = []

        async def second_worker(wake: Wake) -> None:
            taken_over.append(wake)

        loop = asyncio.get_running_loop()
        handed_back_at = loop.time()
        async with consuming(wake_queue, second_worker):

            async def taken() -> bool:
                return bool(taken_over)

            await eventually(taken, within=wake_queue.ack_wait * 0.8)
        assert loop.time() - handed_back_at < wake_queue.ack_wait
        assert taken_over[0].thread_id == thread

    async def test_concurrency_must_be_positive(self, bus: Bus, redis: Redis, keys: Keys) -> None:
        async def handler(wake: Wake) -> None:
            raise AssertionError("never called")

        with pytest.raises(ValueError, match="concurrency"):
            WakeConsumer(
                bus,
                Role.CODER,
                handler,
                dead_letters=DeadLetterOffice(bus, redis, keys, Outbound({}, {}, [])),
                concurrency=0,
                heartbeat=1,
                max_deliver=1,
            )


class TestTraceContext:
    async def test_the_run_continues_the_trace_the_wake_was_published_in(
        self, wake_queue: WakeQueue, thread_id: str
    ) -> None:
        seen: list[SpanContext] = []

        async def handler(wake: Wake) -> None:
            seen.append(trace.get_current_span().get_span_context())

        with recorded_spans() as recording:
            with recording.tracer.start_as_current_span("webhook") as webhook:
                await wake_queue.wake(thread_id)
            async with consuming(wake_queue, handler):

                async def handled() -> bool:
                    return bool(named(recording.spans(), "wake coder"))

                await eventually(handled)
            spans = recording.spans()

        [publish] = [span for span in spans if span.name.startswith("publish ")]
        [wake] = named(spans, "wake coder")
        assert parent_id(publish) == webhook.get_span_context().span_id
        assert parent_id(wake) == span_id(publish)
        assert trace_id(wake) == webhook.get_span_context().trace_id
        assert wake.kind is SpanKind.CONSUMER
        assert attribute(wake, "drydock.thread_id") == thread_id
        assert [(context.trace_id, context.span_id) for context in seen] == [(trace_id(wake), span_id(wake))]

    async def test_untraced_the_handler_runs_in_no_span(self, wake_queue: WakeQueue, thread_id: str) -> None:
        seen: list[SpanContext] = []

        async def handler(wake: Wake) -> None:
            seen.append(trace.get_current_span().get_span_context())

        await wake_queue.wake(thread_id)
        async with consuming(wake_queue, handler):

            async def handled() -> bool:
                return bool(seen)

            await eventually(handled)
        assert not seen[0].is_valid
