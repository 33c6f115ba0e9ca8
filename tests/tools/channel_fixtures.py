"""Helpers of the channel-facing tool tests: the fake GitHub with the Drydock App installed on
``acme``, settings pointing the channel clients at the fakes, and what a tool left on the bus."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from nats.js.errors import NotFoundError

from drydock.bus import Bus, RunEvent, Wake, subjects
from drydock.bus.envelopes import EventType, InboxMessage
from drydock.bus.streams import EVENTS_STREAM, RUNS_STREAM
from drydock.config import Settings
from drydock.roles import Role
from drydock.threads.inbox import Inbox
from tests.fakes.github import App, FakeGithub, Installation
from tests.fakes.github.activity import Activity, activity_of
from tests.tools.conftest import REPOSITORY

ORG = "acme"


@dataclass
class GithubWorld:
    """The fake GitHub and the Drydock App installed on every repository of ``acme``."""

    fake: FakeGithub
    app: App
    installation: Installation

    @property
    def activity(self) -> Activity:
        return activity_of(self.fake.state)

    def settings(self, settings: Settings, **extra: Any) -> Settings:
        """``settings`` with the App configured against the fake."""
        return configured(
            settings,
            github={"api_url": self.fake.base_url, "app_id": self.app.id, "private_key": self.app.private_key_pem}
            | extra,
        )


@contextlib.asynccontextmanager
async def github_world() -> AsyncIterator[GithubWorld]:
    async with FakeGithub() as fake:
        app = fake.create_app("drydock")
        fake.state.repository(REPOSITORY)
        yield GithubWorld(fake, app, fake.install(app, ORG))


def configured(settings: Settings, **sections: dict[str, Any]) -> Settings:
    """``settings`` with ``sections`` merged into their sections, validated as from the environment."""
    updates = {}
    for name, values in sections.items():
        section = getattr(settings, name)
        updates[name] = type(section).model_validate({**section.model_dump(), **values})
    return settings.model_copy(update=updates)


async def last_event(bus: Bus, thread_id: str, type: EventType) -> RunEvent | None:
    """The thread's most recent run event of ``type``."""
    try:
        raw = await bus.js.get_last_msg(EVENTS_STREAM, subjects.event(thread_id, type.value))
    except NotFoundError:
        return None
    assert raw.data is not None
    return RunEvent.model_validate_json(raw.data)


async def wakes(bus: Bus, role: Role, thread_id: str) -> list[Wake]:
    """The wakes of ``role`` for the thread still in the runs stream (no worker consumes them here)."""
    subject = subjects.run(role, thread_id)
    found: list[Wake] = []
    seq = 0
    while True:
        try:
            raw = await bus.js.get_msg(RUNS_STREAM, seq=seq + 1, subject=subject, next=True)
        except NotFoundError:
            return found
        assert raw.data is not None
        assert raw.seq is not None
        found.append(Wake.model_validate_json(raw.data))
        seq = raw.seq


async def inbox(bus: Bus, thread_id: str) -> list[InboxMessage]:
    return [stored.message for stored in await Inbox(bus).read_after(thread_id)]
