"""Subject builders. Every subject Drydock uses is spelled here and nowhere else."""

import re

from drydock.roles import Role

INBOX = "drydock.inbox"
RUN = "drydock.run"
MAX_DELIVERIES_ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"
"""JetStream's advisory when a message used up its consumer's deliveries: ``.<stream>.<consumer>``."""
EVENT = "drydock.event"
GITHUB = "drydock.github"


_NOT_IN_A_TOKEN = re.compile(r"[. *>\t\r\n]")


def _token(value: str) -> str:
    if not value or _NOT_IN_A_TOKEN.search(value) is not None:
        raise ValueError(f"{value!r} cannot be a subject token")
    return value


def inbox(thread_id: str) -> str:
    return f"{INBOX}.{_token(thread_id)}"


def run(role: Role, thread_id: str) -> str:
    return f"{RUN}.{role.value}.{_token(thread_id)}"


def runs_of(role: Role) -> str:
    """The filter that matches every wake of one role."""
    return f"{RUN}.{role.value}.*"


def event(thread_id: str, event_type: str) -> str:
    return f"{EVENT}.{_token(thread_id)}.{_token(event_type)}"


def events_of(thread_id: str) -> str:
    return f"{EVENT}.{_token(thread_id)}.*"


def events_of_type(event_type: str) -> str:
    """The filter that matches one event type of every thread."""
    return f"{EVENT}.*.{_token(event_type)}"


def github(event_name: str) -> str:
    return f"{GITHUB}.{_token(event_name)}"
