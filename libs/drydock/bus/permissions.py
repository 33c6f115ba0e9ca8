"""What each service may publish and subscribe to on NATS: one user per service.

The split (README, "The control plane"):

- ``ingress`` publishes inbox messages, wakes and GitHub events, and the ``approved`` events of
  owners' approvals; it reads nothing.
- ``dashboard`` reads a thread's events (ordered consumers on ``DRYDOCK_EVENTS``) and its inbox,
  hands messages to coder and analyzer threads (inbox and their wakes), and wakes any thread
  again when an administrator retries a dead letter; it publishes the ``approved`` events of
  owners' approvals made on the dashboard.
- ``<role>-worker`` consumes its role's runs consumer and nothing else (and hears its
  max-deliveries advisory, reading and removing a wake it buries as a dead letter), reads the
  inbox (and hears its subject, so that a run reads it only when something arrived), publishes
  events, wakes its own role's threads (the lease sweeper) and keeps snapshots
  in the object store bucket. The coder also hands
  messages to reviewer threads (``request_review``), the reviewer to analyzer threads (a
  repository without guidelines); the analyzer publishes no message.
- ``autofix-controller`` consumes its two consumers, publishes events and hands messages to
  any role (repair runs, scheduled wake-ups).
- ``credential-proxy`` publishes events (its denials).
- ``web`` serves the ingress and the dashboard in one process: both sets.
- ``provisioner`` manages the streams and consumers (``drydock provision``, the embedded
  servers' tests): everything.
- every user reads the store epoch's witness in its key-value bucket (``drydock.infra.store_epoch``).

Every user receives replies only under its own inbox prefix (``_INBOX_<user>``), so none reads
another's replies; none reaches the JetStream API of a stream it does not use.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from drydock.bus import subjects
from drydock.bus.client import inbox_prefix
from drydock.bus.envelopes import EventType
from drydock.bus.streams import (
    AUTOFIX_CONSUMER,
    AUTOFIX_RUNS_CONSUMER,
    EVENTS_STREAM,
    GITHUB_STREAM,
    INBOX_STREAM,
    RUNS_STREAM,
    run_consumer,
)
from drydock.config import SnapshotSettings
from drydock.infra.store_epoch import BUCKET as STORE_EPOCH_BUCKET
from drydock.roles import Role

PROVISIONER = "provisioner"
_API = "$JS.API"


@dataclass(frozen=True)
class Permissions:
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]

    def __or__(self, other: Permissions) -> Permissions:
        return Permissions(_union(self.publish, other.publish), _union(self.subscribe, other.subscribe))


def _union(*groups: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(subject for group in groups for subject in group))


def _user(user: str, publish: Iterable[str]) -> Permissions:
    return Permissions(_union(publish, _store_epoch()), (f"{inbox_prefix(user)}.>",))


def _store_epoch() -> tuple[str, ...]:
    """Every service reads the store epoch's witness (and writes it for a new key prefix)."""
    stream = f"KV_{STORE_EPOCH_BUCKET}"
    return (
        f"$KV.{STORE_EPOCH_BUCKET}.>",
        f"{_API}.STREAM.INFO.{stream}",
        f"{_API}.STREAM.MSG.GET.{stream}",
        *_read_directly(stream),
    )


def _consume(stream: str, consumer: str) -> tuple[str, ...]:
    """Fetch from a durable pull consumer and acknowledge what it delivered."""
    return (
        f"{_API}.CONSUMER.MSG.NEXT.{stream}.{consumer}",
        f"{_API}.CONSUMER.INFO.{stream}.{consumer}",
        f"$JS.ACK.{stream}.{consumer}.>",
    )


def _read_directly(stream: str) -> tuple[str, ...]:
    return (f"{_API}.DIRECT.GET.{stream}", f"{_API}.DIRECT.GET.{stream}.>")


def _ordered_consumers(stream: str) -> tuple[str, ...]:
    """Ephemeral ordered consumers, as nats-py makes them to read a stream (flow control included)."""
    return (
        f"{_API}.CONSUMER.CREATE.{stream}",
        f"{_API}.CONSUMER.CREATE.{stream}.>",
        f"{_API}.CONSUMER.INFO.{stream}.*",
        f"{_API}.CONSUMER.DELETE.{stream}.*",
        f"$JS.FC.{stream}.>",
    )


def _hand_off(*roles: Role) -> tuple[str, ...]:
    return (f"{subjects.INBOX}.*", *(subjects.runs_of(role) for role in roles))


def _snapshots(settings: SnapshotSettings) -> tuple[str, ...]:
    stream = f"OBJ_{settings.bucket}"
    return (
        f"$O.{settings.bucket}.>",
        # nats-py's object get finds the bucket's stream by its subject (stream names only).
        f"{_API}.STREAM.NAMES",
        f"{_API}.STREAM.INFO.{stream}",
        f"{_API}.STREAM.MSG.GET.{stream}",
        f"{_API}.STREAM.PURGE.{stream}",
        *_read_directly(stream),
        *_ordered_consumers(stream),
    )


_EVENTS = (f"{subjects.EVENT}.*.*",)
_APPROVED = f"{subjects.EVENT}.*.{EventType.APPROVED}"
"""An owner's approval, recorded where it is made (a reply at the ingress, the dashboard)."""
_HANDS_OFF_TO = {Role.CODER: Role.REVIEWER, Role.REVIEWER: Role.ANALYZER}
"""``request_review`` hands a pull request to a reviewer thread; a review without guidelines
asks the analyzer for them."""


def _worker(role: Role, snapshots: SnapshotSettings) -> Permissions:
    user = f"{role.value}-worker"
    consumer = run_consumer(role)
    # Its own role's wakes: the lease sweeper resumes the threads of a worker that died.
    publish = [*_consume(RUNS_STREAM, consumer), *_read_directly(INBOX_STREAM), *_EVENTS]
    publish.append(subjects.runs_of(role))
    publish += _snapshots(snapshots)
    # A wake that used up its deliveries is read and removed once it is buried as a dead letter.
    publish += [f"{_API}.STREAM.MSG.GET.{RUNS_STREAM}", f"{_API}.STREAM.MSG.DELETE.{RUNS_STREAM}"]
    if role in _HANDS_OFF_TO:
        publish += _hand_off(_HANDS_OFF_TO[role])
    advisory = f"{subjects.MAX_DELIVERIES_ADVISORY}.{RUNS_STREAM}.{consumer}"
    # Its runs hear their thread's inbox subject, to read the stream only when something arrived.
    return _user(user, publish) | Permissions((), (advisory, f"{subjects.INBOX}.*"))


def service_permissions(snapshots: SnapshotSettings | None = None) -> dict[str, Permissions]:
    """Each service's NATS user (named as the service) and its permissions, the provisioner's last."""
    snapshots = snapshots or SnapshotSettings()
    ingress = _user("ingress", (f"{subjects.INBOX}.*", f"{subjects.RUN}.*.*", f"{subjects.GITHUB}.*", _APPROVED))
    dashboard_publish = (
        *_ordered_consumers(EVENTS_STREAM),
        *_read_directly(INBOX_STREAM),
        # Messages to coder and analyzer threads; any thread's wake, since an administrator's
        # retry of a dead letter wakes its thread whatever its role.
        f"{subjects.INBOX}.*",
        f"{subjects.RUN}.*.*",
        _APPROVED,
    )
    return {
        "ingress": ingress,
        "dashboard": _user("dashboard", dashboard_publish),
        "web": _user("web", ingress.publish + dashboard_publish),
        **{f"{role.value}-worker": _worker(role, snapshots) for role in Role},
        "autofix-controller": _user(
            "autofix-controller",
            (
                *_consume(GITHUB_STREAM, AUTOFIX_CONSUMER),
                *_consume(EVENTS_STREAM, AUTOFIX_RUNS_CONSUMER),
                *_EVENTS,
                *_hand_off(*Role),
            ),
        ),
        "credential-proxy": _user("credential-proxy", _EVENTS),
        PROVISIONER: Permissions((">",), (">",)),
    }


def password_variables(snapshots: SnapshotSettings | None = None) -> dict[str, str]:
    """Each user's password as a nats-server environment variable: ``coder-worker`` → ``$CODER_WORKER_PASSWORD``."""
    return {user: "$" + user.upper().replace("-", "_") + "_PASSWORD" for user in service_permissions(snapshots)}


def nats_authorization(passwords: Mapping[str, str], snapshots: SnapshotSettings | None = None) -> str:
    """The ``authorization`` block of a nats-server configuration with every user of
    :func:`service_permissions`. ``passwords`` maps each user to its password, or to a
    ``$VARIABLE`` that nats-server reads from its environment."""
    lines = ["authorization {", "  users = ["]
    for user, permissions in service_permissions(snapshots).items():
        password = passwords[user]
        quoted = password if password.startswith("$") else json.dumps(password)
        lines.append(f"    {{user: {json.dumps(user)}, password: {quoted}, permissions: {{")
        lines.append(f"      publish: {{allow: {json.dumps(list(permissions.publish))}}}")
        lines.append(f"      subscribe: {{allow: {json.dumps(list(permissions.subscribe))}}}")
        lines.append("    }}")
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"
