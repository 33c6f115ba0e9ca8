from __future__ import annotations

from datetime import timedelta

from nats.aio.client import Client as NatsClient
from nats.js.api import RetentionPolicy

from drydock.bus import provision, topology
from drydock.bus.streams import INBOX_STREAM, RUNS_STREAM, run_consumer
from drydock.config import NatsSettings
from drydock.roles import Role


class TestProvision:
    async def test_is_idempotent_and_creates_everything(self, nats_client: NatsClient) -> None:
        js = nats_client.jetstream()
        wanted = topology(NatsSettings())
        await provision(js, wanted)
        await provision(js, wanted)
        for stream in wanted.streams:
            assert stream.name is not None
            info = await js.stream_info(stream.name)
            assert info.config.subjects == stream.subjects
        runs = await js.stream_info(RUNS_STREAM)
        assert runs.config.retention == RetentionPolicy.WORK_QUEUE
        for role in Role:
            consumer = await js.consumer_info(RUNS_STREAM, run_consumer(role))
            assert consumer.config.filter_subject == f"drydock.run.{role.value}.*"

    async def test_a_changed_consumer_setting_takes_effect(self, nats_client: NatsClient) -> None:
        js = nats_client.jetstream()
        await provision(js, topology(NatsSettings(run_ack_wait=timedelta(seconds=60))))
        before = await js.consumer_info(RUNS_STREAM, run_consumer(Role.CODER))
        assert before.config.ack_wait == 60
        await provision(js, topology(NatsSettings(run_ack_wait=timedelta(seconds=90), run_max_deliver=4)))
        after = await js.consumer_info(RUNS_STREAM, run_consumer(Role.CODER))
        assert after.config.ack_wait == 90
        assert after.config.max_deliver == 4
        assert after.config.backoff == [90, 180, 360]
        await provision(js, topology(NatsSettings()))

    async def test_a_changed_stream_setting_takes_effect(self, nats_client: NatsClient) -> None:
        js = nats_client.jetstream()
        await provision(js, topology(NatsSettings(inbox_max_age=timedelta(days=3))))
        assert (await js.stream_info(INBOX_STREAM)).config.max_age == timedelta(days=3).total_seconds()
        await provision(js, topology(NatsSettings()))
        assert (await js.stream_info(INBOX_STREAM)).config.max_age == timedelta(days=14).total_seconds()
