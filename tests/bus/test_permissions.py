"""Each service's NATS user against the real embedded nats-server: what it may and may not do."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient
from nats.errors import Error as NatsError
from pydantic import SecretStr

from drydock.bus import (
    Author,
    Bus,
    BusUnavailable,
    Channel,
    EventType,
    InboxMessage,
    ReplyAddress,
    RunEvent,
    Wake,
    subjects,
)
from drydock.bus.client import connect_nats
from drydock.bus.permissions import (
    PROVISIONER,
    nats_authorization,
    password_variables,
    service_permissions,
)
from drydock.bus.streams import EVENTS_STREAM, INBOX_STREAM, RUNS_STREAM, run_consumer
from drydock.bus.subjects import MAX_DELIVERIES_ADVISORY
from drydock.config import NatsSettings, SnapshotSettings
from drydock.embedded import EmbeddedServer, EmbeddedUrls, free_port, nats_server_binary
from drydock.roles import Role
from services.dashboard.threads.events import ThreadEvents


@asynccontextmanager
async def connected(infra: EmbeddedUrls, user: str, password: str | None = None) -> AsyncIterator[NatsClient]:
    settings = NatsSettings(
        url=infra.nats_address,
        user=user,
        password=SecretStr(password if password is not None else infra.nats_passwords[user]),
    )
    nc = await connect_nats(settings, name=f"permissions-test-{user}")
    try:
        yield nc
    finally:
        await nc.close()


async def violation(nc: NatsClient, subject: str, *, within: float = 10.0) -> str:
    """The server's permissions violation naming ``subject``, awaited until the deadline
    (nats-py reports it in lower case)."""
    deadline = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < deadline:
        error = str(nc.last_error or "").lower()
        if "permissions violation" in error and f'"{subject.lower()}"' in error:
            return error
        await asyncio.sleep(0.05)
    pytest.fail(f"no permissions violation for {subject} within {within} s; last error: {nc.last_error}")


def message(thread_id: str) -> InboxMessage:
    return InboxMessage(
        thread_id=thread_id,
        delivery_id=uuid.uuid4().hex,
        channel=Channel.DASHBOARD,
        author=Author(channel=Channel.DASHBOARD, external_id="u1", name="someone"),
        text="hello",
        reply_to=ReplyAddress(channel=Channel.DASHBOARD),
    )


class TestConnecting:
    async def test_an_anonymous_connection_is_refused(self, infra: EmbeddedUrls) -> None:
        with pytest.raises(BusUnavailable, match="refused a connection without a user"):
            await connect_nats(NatsSettings(url=infra.nats_address), name="anonymous")

    async def test_a_wrong_password_is_refused(self, infra: EmbeddedUrls) -> None:
        with pytest.raises(BusUnavailable, match="refused user 'ingress'"):
            async with connected(infra, "ingress", password="not-the-password"):
                pass

    async def test_the_refusal_does_not_show_the_password(self, infra: EmbeddedUrls) -> None:
        assert infra.nats is not None
        wrong = infra.nats.replace(infra.nats_passwords[PROVISIONER], "wrong-secret")
        with pytest.raises(BusUnavailable) as raised:
            await connect_nats(NatsSettings(url=wrong), name="wrong")
        assert "wrong-secret" not in str(raised.value)


class TestIngress:
    async def test_publishes_to_the_inbox(self, infra: EmbeddedUrls, bus: Bus, thread_id: str) -> None:
        async with connected(infra, "ingress") as nc:
            ack = await Bus(nc).publish(subjects.inbox(thread_id), message(thread_id))
        assert ack.stream == INBOX_STREAM

    async def test_cannot_consume_runs(self, infra: EmbeddedUrls, bus: Bus) -> None:
        async with connected(infra, "ingress") as nc:
            subscription = await nc.jetstream().pull_subscribe_bind(
                durable=run_consumer(Role.CODER), stream=RUNS_STREAM
            )
            with pytest.raises((TimeoutError, NatsError)):
                await subscription.fetch(1, timeout=1)
            await violation(nc, f"$JS.API.CONSUMER.MSG.NEXT.{RUNS_STREAM}.{run_consumer(Role.CODER)}")

    async def test_publishes_approved_events_and_no_other(self, infra: EmbeddedUrls, bus: Bus, thread_id: str) -> None:
        async with connected(infra, "ingress") as nc:
            ack = await Bus(nc).publish(
                subjects.event(thread_id, EventType.APPROVED),
                RunEvent(thread_id=thread_id, run_id="", type=EventType.APPROVED, data={}),
            )
            assert ack.stream == EVENTS_STREAM
            await nc.publish(subjects.event(thread_id, EventType.COMPLETED), b"{}")
            await violation(nc, subjects.event(thread_id, EventType.COMPLETED))

    async def test_cannot_read_the_inbox(self, infra: EmbeddedUrls, bus: Bus) -> None:
        async with connected(infra, "ingress") as nc:
            with pytest.raises((TimeoutError, NatsError)):
                await nc.jetstream(timeout=1).get_msg(INBOX_STREAM, seq=1)
            await violation(nc, f"$JS.API.STREAM.MSG.GET.{INBOX_STREAM}")

    async def test_cannot_listen_to_other_users_replies(self, infra: EmbeddedUrls) -> None:
        async with connected(infra, "ingress") as nc:
            await nc.subscribe("_INBOX.>")
            await violation(nc, "_INBOX.>")


class TestWorkers:
    async def test_an_analyzer_worker_cannot_publish_to_the_inbox(
        self, infra: EmbeddedUrls, bus: Bus, thread_id: str
    ) -> None:
        async with connected(infra, "analyzer-worker") as nc:
            with pytest.raises(BusUnavailable):
                await Bus(nc, timeout=1).publish(subjects.inbox(thread_id), message(thread_id))
            await violation(nc, subjects.inbox(thread_id))

    async def test_a_worker_emits_events(self, infra: EmbeddedUrls, bus: Bus, thread_id: str) -> None:
        async with connected(infra, "reviewer-worker") as nc:
            ack = await Bus(nc).emit(RunEvent(thread_id=thread_id, run_id="r1", type=EventType.STARTED, data={}))
        assert ack.seq > 0

    async def test_a_worker_keeps_and_reads_snapshot_objects(self, infra: EmbeddedUrls, bus: Bus) -> None:
        name = f"permissions-test-{uuid.uuid4().hex}"
        async with connected(infra, "coder-worker") as nc:
            bucket = await nc.jetstream(timeout=5).object_store(SnapshotSettings().bucket)
            await bucket.put(name, b"workspace")
            stored = await asyncio.wait_for(bucket.get(name), 10)
            await bucket.delete(name)
            assert nc.last_error is None
        assert stored.data == b"workspace"

    async def test_a_worker_cannot_consume_another_roles_runs(self, infra: EmbeddedUrls, bus: Bus) -> None:
        async with connected(infra, "analyzer-worker") as nc:
            subscription = await nc.jetstream().pull_subscribe_bind(
                durable=run_consumer(Role.CODER), stream=RUNS_STREAM
            )
            with pytest.raises((TimeoutError, NatsError)):
                await subscription.fetch(1, timeout=1)
            await violation(nc, f"$JS.API.CONSUMER.MSG.NEXT.{RUNS_STREAM}.{run_consumer(Role.CODER)}")

    async def test_a_worker_wakes_its_own_roles_threads(self, infra: EmbeddedUrls, bus: Bus, thread_id: str) -> None:
        async with connected(infra, "analyzer-worker") as nc:
            ack = await Bus(nc).wake(Wake(thread_id=thread_id, role=Role.ANALYZER, reason="resume"))
            assert nc.last_error is None
        assert ack.seq > 0

    @pytest.mark.parametrize(("user", "role"), [("coder-worker", Role.ANALYZER), ("reviewer-worker", Role.CODER)])
    async def test_a_worker_wakes_only_its_role_and_the_role_it_hands_off_to(
        self, infra: EmbeddedUrls, user: str, role: Role, thread_id: str
    ) -> None:
        async with connected(infra, user) as nc:
            with pytest.raises(BusUnavailable):
                await Bus(nc, timeout=1).publish(subjects.run(role, thread_id), message(thread_id))
            await violation(nc, subjects.run(role, thread_id))

    async def test_a_worker_hears_its_roles_max_deliveries_advisory(self, infra: EmbeddedUrls, bus: Bus) -> None:
        advisory = f"{MAX_DELIVERIES_ADVISORY}.{RUNS_STREAM}.{run_consumer(Role.CODER)}"
        async with connected(infra, "coder-worker") as nc, connected(infra, PROVISIONER) as provisioner:
            subscription = await nc.subscribe(advisory, queue=f"dead-letters-{run_consumer(Role.CODER)}")
            await nc.flush()
            await provisioner.publish(advisory, b"{}")
            heard = await subscription.next_msg(timeout=10)
            assert nc.last_error is None
        assert heard.data == b"{}"

    async def test_a_worker_hears_its_threads_inbox(self, infra: EmbeddedUrls, bus: Bus, thread_id: str) -> None:
        async with connected(infra, "coder-worker") as nc:
            subscription = await nc.subscribe(subjects.inbox(thread_id))
            await nc.flush()
            await bus.publish(subjects.inbox(thread_id), message(thread_id))
            heard = await subscription.next_msg(timeout=10)
            assert nc.last_error is None
        assert InboxMessage.model_validate_json(heard.data).thread_id == thread_id

    async def test_a_worker_cannot_manage_streams(self, infra: EmbeddedUrls, bus: Bus) -> None:
        async with connected(infra, "coder-worker") as nc:
            with pytest.raises((TimeoutError, NatsError)):
                await nc.jetstream(timeout=1).delete_stream(INBOX_STREAM)
            await violation(nc, f"$JS.API.STREAM.DELETE.{INBOX_STREAM}")


class TestDashboard:
    async def test_reads_a_threads_events(self, infra: EmbeddedUrls, bus: Bus, thread_id: str) -> None:
        await bus.emit(RunEvent(thread_id=thread_id, run_id="r1", type=EventType.STARTED, data={}))
        async with connected(infra, "dashboard") as nc:
            history = await ThreadEvents(nc.jetstream(timeout=5)).history(thread_id)
        assert [stored.event.type for stored in history] == [EventType.STARTED]

    async def test_cannot_publish_github_events(self, infra: EmbeddedUrls) -> None:
        async with connected(infra, "dashboard") as nc:
            await nc.publish(subjects.github("push"), b"{}")
            await violation(nc, subjects.github("push"))


class TestAuthorizationBlock:
    def test_only_the_provisioner_manages_streams_and_only_workers_read_snapshot_messages(self) -> None:
        for user, permissions in service_permissions().items():
            if user == PROVISIONER:
                continue
            for subject in permissions.publish:
                assert not subject.startswith(
                    ("$JS.API.STREAM.CREATE", "$JS.API.STREAM.UPDATE", "$JS.API.STREAM.DELETE")
                )
                assert subject not in (">", "$JS.>", "$JS.API.>"), (user, subject)
                if (
                    subject.startswith("$JS.API.STREAM.MSG.GET.")
                    and subject != "$JS.API.STREAM.MSG.GET.KV_drydock_store"
                ):
                    assert user.endswith("-worker")
                    assert subject in (
                        "$JS.API.STREAM.MSG.GET.OBJ_drydock-snapshots",
                        "$JS.API.STREAM.MSG.GET.DRYDOCK_RUNS",
                    )

    def test_names_every_user_with_its_password_variable(self) -> None:
        block = nats_authorization(password_variables())
        for user in service_permissions():
            assert f'user: "{user}"' in block
        assert "password: $CODER_WORKER_PASSWORD," in block

    async def test_nats_server_reads_the_passwords_from_its_environment(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        variables = password_variables()
        for variable in variables.values():
            monkeypatch.setenv(variable.removeprefix("$"), f"secret-of-{variable.removeprefix('$').lower()}")
        config = tmp_path / "nats.conf"
        config.write_text(nats_authorization(variables))
        port = free_port()
        argv = [
            str(nats_server_binary()),
            "-c",
            str(config),
            "-js",
            "-a",
            "127.0.0.1",
            "-sd",
            str(tmp_path),
        ]
        server = EmbeddedServer("nats", argv, port, "nats", tmp_path)
        await server.start()
        try:
            own = NatsSettings(url=server.url, user="ingress", password=SecretStr("secret-of-ingress_password"))
            nc = await connect_nats(own, name="from-environment")
            assert nc.is_connected
            await nc.close()
        finally:
            await server.stop()


async def drydock(*arguments: str, environment: dict[str, str], within: float = 120) -> tuple[int, str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("DRYDOCK_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "drydock",
        *arguments,
        env=clean | environment,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), within)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, output.decode()


class TestProvisionCommand:
    @pytest.mark.timeout(300)
    async def test_the_provisioner_provisions_and_a_service_user_may_not(self, infra: EmbeddedUrls) -> None:
        base = {
            "DRYDOCK_NATS_URL": str(infra.nats_address),
            "DRYDOCK_REDIS_URL": str(infra.redis),
            "DRYDOCK_LOG_LEVEL": "WARNING",
        }
        as_provisioner = base | {
            "DRYDOCK_NATS_USER": PROVISIONER,
            "DRYDOCK_NATS_PASSWORD": infra.nats_passwords[PROVISIONER],
        }
        as_ingress = base | {"DRYDOCK_NATS_USER": "ingress", "DRYDOCK_NATS_PASSWORD": infra.nats_passwords["ingress"]}
        (code, output), (refused, why) = await asyncio.gather(
            drydock("provision", environment=as_provisioner), drydock("provision", environment=as_ingress)
        )
        assert code == 0, output
        assert output.strip().splitlines()[-1].startswith("drydock provision: streams and consumers are up to date")
        assert refused == 1
        assert "cannot provision the streams as ingress" in why
        assert "Traceback" not in why
