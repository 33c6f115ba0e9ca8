"""The JetStream topology of DESIGN.md section 3, provisioned explicitly at start-up.

Subscribers never create streams or consumers: :func:`provision` creates or updates every one
of them, so a consumer setting changed here takes effect on the next start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

import structlog
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import NotFoundError
from pydantic import BaseModel

from drydock.bus import subjects
from drydock.bus.envelopes import EventType, GithubEvent, RunEvent, Wake
from drydock.config import NatsSettings, SnapshotSettings
from drydock.roles import Role

log = structlog.get_logger(__name__)

INBOX_STREAM = "DRYDOCK_INBOX"
RUNS_STREAM = "DRYDOCK_RUNS"
EVENTS_STREAM = "DRYDOCK_EVENTS"
GITHUB_STREAM = "DRYDOCK_GITHUB"
AUTOFIX_CONSUMER = "autofix"
AUTOFIX_RUNS_CONSUMER = "autofix-runs"
"""The autofix controller's view of run endings (completed, step limit, stopped, error) on DRYDOCK_EVENTS."""
RUN_END_EVENTS = (EventType.COMPLETED, EventType.STEP_LIMIT, EventType.STOPPED, EventType.ERROR)


Envelope = TypeVar("Envelope", bound=BaseModel)


def run_consumer(role: Role) -> str:
    """The durable pull consumer shared by every replica of a role's worker."""
    return f"run-{role.value}"


@dataclass(frozen=True)
class Subscription(Generic[Envelope]):
    """What a durable consumer delivers: its stream, its name, its subjects and their envelope.

    ``subject`` names each token's meaning (``drydock.run.coder.{thread_id}``): the AsyncAPI
    document shows it as the channel's address."""

    stream: str
    durable: str
    subject: str
    envelope: type[Envelope]
    description: str
    span: str = ""
    """The name of the span each message is handled in (``consume <durable>`` when empty)."""

    @property
    def span_name(self) -> str:
        return self.span or f"consume {self.durable}"


def run_subscription(role: Role) -> Subscription[Wake]:
    return Subscription(
        RUNS_STREAM,
        run_consumer(role),
        f"{subjects.RUN}.{role.value}.{{thread_id}}",
        Wake,
        f"Wakes of {role.value} threads, one durable consumer shared by every {role.value} worker.",
        span=f"wake {role.value}",
    )


GITHUB_EVENTS = Subscription(
    GITHUB_STREAM,
    AUTOFIX_CONSUMER,
    f"{subjects.GITHUB}.{{event}}",
    GithubEvent,
    "CI and pull-request events (the token is X-GitHub-Event) for the autofix controller.",
)
RUN_ENDINGS = Subscription(
    EVENTS_STREAM,
    AUTOFIX_RUNS_CONSUMER,
    f"{subjects.EVENT}.{{thread_id}}.{{type}}",
    RunEvent,
    "Run endings (completed, step_limit, stopped, error) for the autofix controller, which end repair runs.",
)


@dataclass(frozen=True)
class ConsumerSpec:
    stream: str
    config: ConsumerConfig


@dataclass(frozen=True)
class Topology:
    streams: tuple[StreamConfig, ...]
    consumers: tuple[ConsumerSpec, ...]


def _backoff(ack_wait: float, max_deliver: int) -> list[float]:
    """Redelivery delays: the ack wait first (a dead worker's wake returns then), doubling to 10 min."""
    delays, delay = [], ack_wait
    for _ in range(max_deliver - 1):
        delays.append(delay)
        delay = min(delay * 2, max(600.0, ack_wait))
    return delays


def snapshot_bucket_stream(settings: SnapshotSettings, *, replicas: int) -> StreamConfig:
    """The stream behind the snapshot object store bucket, shaped as nats-py's ``create_object_store`` makes it."""
    return StreamConfig(
        name=f"OBJ_{settings.bucket}",
        description="Workspace snapshots of every thread.",
        subjects=[f"$O.{settings.bucket}.C.>", f"$O.{settings.bucket}.M.>"],
        retention=RetentionPolicy.LIMITS,
        discard=DiscardPolicy.NEW,
        storage=StorageType.FILE,
        num_replicas=replicas,
        allow_rollup_hdrs=True,
        allow_direct=True,
    )


def topology(settings: NatsSettings, snapshots: SnapshotSettings | None = None) -> Topology:
    """Every stream, bucket and durable consumer; ``snapshots`` names the snapshot bucket (default settings)."""
    duplicate_window = settings.duplicate_window.total_seconds()
    streams = (
        StreamConfig(
            name=INBOX_STREAM,
            description="Every inbound message for a thread, in order.",
            subjects=[f"{subjects.INBOX}.*"],
            retention=RetentionPolicy.LIMITS,
            max_age=settings.inbox_max_age.total_seconds(),
            storage=StorageType.FILE,
            num_replicas=settings.replicas,
            duplicate_window=duplicate_window,
            allow_direct=True,
        ),
        StreamConfig(
            name=RUNS_STREAM,
            description="Wake signals, one durable pull consumer per role.",
            subjects=[f"{subjects.RUN}.*.*"],
            retention=RetentionPolicy.WORK_QUEUE,
            discard=DiscardPolicy.OLD,
            storage=StorageType.FILE,
            num_replicas=settings.replicas,
            duplicate_window=min(duplicate_window, 120.0),
        ),
        StreamConfig(
            name=EVENTS_STREAM,
            description="What runs did, for the dashboard and status indicators.",
            subjects=[f"{subjects.EVENT}.*.*"],
            retention=RetentionPolicy.LIMITS,
            max_age=settings.events_max_age.total_seconds(),
            storage=StorageType.FILE,
            num_replicas=settings.replicas,
            allow_direct=True,
        ),
        StreamConfig(
            name=GITHUB_STREAM,
            description="CI and pull-request events for the autofix controller.",
            subjects=[f"{subjects.GITHUB}.*"],
            retention=RetentionPolicy.LIMITS,
            max_age=settings.github_max_age.total_seconds(),
            storage=StorageType.FILE,
            num_replicas=settings.replicas,
            duplicate_window=duplicate_window,
        ),
        snapshot_bucket_stream(snapshots or SnapshotSettings(), replicas=settings.replicas),
    )
    ack_wait = settings.run_ack_wait.total_seconds()
    backoff = _backoff(ack_wait, settings.run_max_deliver) or None

    def work_consumer(stream: str, name: str, filter_subject: str, description: str) -> ConsumerSpec:
        config = ConsumerConfig(
            name=name,
            durable_name=name,
            description=description,
            filter_subject=filter_subject,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ack_wait,
            max_deliver=settings.run_max_deliver,
            backoff=backoff,
            max_ack_pending=1000,
        )
        return ConsumerSpec(stream, config)

    consumers = (
        *(
            work_consumer(RUNS_STREAM, run_consumer(role), subjects.runs_of(role), f"{role.value} worker wakes")
            for role in Role
        ),
        work_consumer(GITHUB_STREAM, AUTOFIX_CONSUMER, f"{subjects.GITHUB}.*", "autofix controller"),
        ConsumerSpec(
            EVENTS_STREAM,
            ConsumerConfig(
                name=AUTOFIX_RUNS_CONSUMER,
                durable_name=AUTOFIX_RUNS_CONSUMER,
                description="autofix controller: run endings, which end repair runs",
                filter_subjects=[subjects.events_of_type(kind.value) for kind in RUN_END_EVENTS],
                # Endings from before the consumer existed can end no repair.
                deliver_policy=DeliverPolicy.NEW,
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=ack_wait,
                max_deliver=settings.run_max_deliver,
                backoff=backoff,
                max_ack_pending=1000,
            ),
        ),
    )
    return Topology(streams=streams, consumers=consumers)


async def provision(js: JetStreamContext, wanted: Topology) -> None:
    """Create or update every stream and durable consumer; safe to run on every start."""
    for config in wanted.streams:
        assert config.name is not None
        try:
            await js.stream_info(config.name)
        except NotFoundError:
            await js.add_stream(config)
            log.info("stream created", stream=config.name)
        else:
            await js.update_stream(config)
    for spec in wanted.consumers:
        # Since nats-server 2.10 a named create with a changed config updates the consumer.
        await js.add_consumer(spec.stream, spec.config)
