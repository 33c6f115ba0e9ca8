"""The ingress under test: the real app served by uvicorn on loopback, on the session's real
NATS and Valkey, with Redis keys under the test's own prefix."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from nats.js.errors import NotFoundError

from drydock.accounts import AccountsStore, Provider, RepositorySettings, TeamDefaults
from drydock.bus import Bus, GithubEvent, InboxMessage, Wake, subjects
from drydock.bus import streams as bus_streams
from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.http import create_app
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.runtime import Runtime
from drydock.threads.inbox import Inbox
from drydock.threads.metadata import ThreadMetadataStore
from drydock.threads.pr_records import PullRequestStore
from services.ingress.accept import Ingress
from services.ingress.webhooks import webhook_router
from tests.fakes.loopback import LoopbackServer
from tests.fakes.signing import SignedRequest
from tests.routes import built

GITHUB_SECRET = "github-webhook-secret"
SLACK_SECRET = "slack-signing-secret"
LINEAR_SECRET = "linear-webhook-secret"
ORG = "acme"
HOST = "github.com"

WATCHED_STREAMS = (bus_streams.INBOX_STREAM, bus_streams.RUNS_STREAM, bus_streams.GITHUB_STREAM)


def ingress_settings(settings: Settings, **sections: dict[str, Any]) -> Settings:
    """The session's settings with webhook secrets, and ``sections`` merged in."""
    base: dict[str, dict[str, Any]] = {
        "github": {"webhook_secret": GITHUB_SECRET, "app_slug": "drydock"},
        "slack": {"signing_secret": SLACK_SECRET},
        "linear": {"webhook_secret": LINEAR_SECRET},
    }
    for name, values in sections.items():
        base[name] = {**base.get(name, {}), **values}
    updates = {}
    for name, values in base.items():
        section = getattr(settings, name)
        updates[name] = type(section).model_validate({**section.model_dump(), **values})
    return settings.model_copy(update=updates)


@dataclass
class RunningIngress:
    """A running ingress and the views a test needs of what it did."""

    client: httpx.AsyncClient
    ingress: Ingress
    bus: Bus
    keys: Keys
    accounts: AccountsStore
    records: PullRequestStore
    metadata: ThreadMetadataStore

    async def send(self, request: SignedRequest) -> httpx.Response:
        return await self.client.post(request.path, content=request.body, headers=request.headers)

    async def inbox(self, thread_id: str) -> list[InboxMessage]:
        return [stored.message for stored in await Inbox(self.bus).read_after(thread_id)]

    async def wakes(self, role: Role, thread_id: str) -> int:
        info = await self.bus.js.stream_info(bus_streams.RUNS_STREAM, subjects_filter=subjects.run(role, thread_id))
        return (info.state.subjects or {}).get(subjects.run(role, thread_id), 0)

    async def last_wake(self, role: Role, thread_id: str) -> Wake:
        raw = await self.bus.js.get_last_msg(bus_streams.RUNS_STREAM, subjects.run(role, thread_id))
        assert raw.data is not None
        return Wake.model_validate_json(raw.data)

    async def github_event(self, event: str, delivery_id: str) -> GithubEvent | None:
        try:
            raw = await self.bus.js.get_last_msg(bus_streams.GITHUB_STREAM, subjects.github(event))
        except NotFoundError:
            return None
        assert raw.data is not None
        found = GithubEvent.model_validate_json(raw.data)
        return found if found.delivery_id == delivery_id else None

    async def stream_marks(self) -> dict[str, int]:
        """The last sequence of every stream the ingress publishes to."""
        return {name: (await self.bus.js.stream_info(name)).state.last_seq for name in WATCHED_STREAMS}


StartIngress = Callable[..., AbstractAsyncContextManager[RunningIngress]]


@pytest.fixture
def start_ingress(settings: Settings, nats_client: Any, bus: Bus, redis: Any, keys: Keys) -> StartIngress:
    """``async with start_ingress(ingress={...}, github={...}) as running:`` — the ingress with
    those settings (and optional outbound clients) on real NATS and Valkey."""

    @contextlib.asynccontextmanager
    async def start(*, outbound: Outbound | None = None, **sections: dict[str, Any]) -> AsyncIterator[RunningIngress]:
        configured = ingress_settings(settings, **sections)
        runtime = Runtime(configured, nats_client, bus, redis, keys)
        ingress = Ingress(runtime, outbound or Outbound({}, {}, []), outbound.github if outbound else None)
        app = create_app("ingress-test", runtime, [built(webhook_router(ingress))])
        async with (
            LoopbackServer(app, lifespan=True, http=configured.http) as server,
            httpx.AsyncClient(base_url=server.base_url) as client,
        ):
            yield RunningIngress(
                client,
                ingress,
                bus,
                keys,
                AccountsStore(redis, keys, host=HOST),
                PullRequestStore(redis, keys),
                ThreadMetadataStore(redis, keys),
            )
        await ingress.aclose()

    return start


@pytest.fixture
def repo() -> str:
    """A repository name of this test alone, so its threads (and their inboxes) are new."""
    return f"widgets-{uuid.uuid4().hex[:8]}"


async def trust(running: RunningIngress, repo: str, *, reviewer: bool = False, default: bool = False) -> None:
    """Allow the ``acme`` organization and enable ``acme/{repo}`` for the coder (and reviewer)."""
    await running.accounts.save_team(
        TeamDefaults(allowed_organizations=(ORG,), default_repository=f"{ORG}/{repo}" if default else None)
    )
    await running.accounts.save_repository(RepositorySettings(full_name=f"{ORG}/{repo}", reviewer=reviewer))


async def link(running: RunningIngress, provider: Provider, external_id: str, user_id: str = "user-1") -> str:
    await running.accounts.link(provider, external_id, user_id)
    return user_id
