"""The dashboard on the session's NATS and Valkey, served in-process: a :class:`Site` per test
(its own Redis key prefix), and people signed in through the development login."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from nats.aio.client import Client as NatsClient
from redis.asyncio import Redis

from drydock.accounts import AccountsStore, RepositorySettings
from drydock.bus import Bus, EventType, RunEvent
from drydock.config import Settings, load_settings
from drydock.http import create_app
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.roles import Role
from drydock.runtime import Runtime
from drydock.threads.fields import CHANNEL, CREATED_AT, OWNER, REPLY_TO, REPOSITORY
from drydock.threads.metadata import ThreadMetadataStore
from drydock.threads.states import ThreadStates
from services.dashboard import router
from services.dashboard.auth.access import RepositoryAccess
from services.dashboard.auth.sessions import SessionStore

PUBLIC_URL = "http://dashboard.test"
REPOSITORY_NAME = "acme/widgets"


@dataclass
class Person:
    """Someone signed in: their own cookie jar, and the session's CSRF token."""

    client: httpx.AsyncClient
    user_id: str
    login: str
    csrf: str

    async def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.client.get(url, **kwargs)

    async def send(self, method: str, url: str, body: Any = None, **kwargs: Any) -> httpx.Response:
        headers = {"X-CSRF-Token": self.csrf} | kwargs.pop("headers", {})
        return await self.client.request(method, url, json=body, headers=headers, **kwargs)

    async def form(self, url: str, data: dict[str, str], **kwargs: Any) -> httpx.Response:
        return await self.client.post(url, data={"csrf_token": self.csrf, **data}, **kwargs)


@dataclass
class Site:
    settings: Settings
    runtime: Runtime
    app: FastAPI
    clients: list[httpx.AsyncClient] = field(default_factory=list)

    @property
    def accounts(self) -> AccountsStore:
        return AccountsStore(self.runtime.redis, self.runtime.keys, host=self.settings.github.host)

    @property
    def metadata(self) -> ThreadMetadataStore:
        return ThreadMetadataStore(self.runtime.redis, self.runtime.keys)

    async def close(self) -> None:
        for client in self.clients:
            await client.aclose()

    def client(self) -> httpx.AsyncClient:
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url=PUBLIC_URL)
        self.clients.append(client)
        return client

    async def sign_in(self, login: str, *, admin: bool = False) -> Person:
        """Sign in through the development login, as a browser does."""
        client = self.client()
        page = await client.get("/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None, page.text
        data = {"login": login, "csrf_token": token.group(1)} | ({"admin": "true"} if admin else {})
        answer = await client.post("/auth/dev", data=data)
        assert answer.status_code == 303, answer.text
        me = (await client.get("/api/v1/me")).json()
        return Person(client, me["user_id"], login, me["csrf_token"])

    async def session(
        self, user_id: str, login: str, *, admin: bool = False, repositories: tuple[str, ...] = ()
    ) -> Person:
        """Someone signed in with GitHub who may see ``repositories`` (without the OAuth dance)."""
        sessions = SessionStore(
            self.runtime.redis,
            self.runtime.keys,
            ServerKeys.from_settings(self.settings.crypto),
            ttl=self.settings.dashboard.session_ttl,
        )
        token, session = await sessions.create(user_id=user_id, provider="github", login=login, admin=admin)
        access = RepositoryAccess(
            self.runtime.redis, self.runtime.keys, self.accounts, ttl=self.settings.dashboard.access_ttl,
            session_ttl=self.settings.dashboard.session_ttl, github=None, tokens=None,
        )  # fmt: skip
        await access.remember(user_id, set(repositories), refreshable=False)
        client = self.client()
        client.cookies.set("drydock_session", token)
        return Person(client, user_id, login, session.csrf)

    async def enable(self, repository: str = REPOSITORY_NAME, **toggles: bool) -> None:
        await self.accounts.save_repository(RepositorySettings.model_validate({"full_name": repository, **toggles}))

    async def thread(
        self,
        thread_id: str,
        *,
        owner: str = "",
        repository: str = REPOSITORY_NAME,
        channel: str = "github",
        kind: Role = Role.CODER,
        created_at: str = "2026-01-01T00:00:00+00:00",
    ) -> str:
        """A thread as the ingress would have created it."""
        reply_to = {"channel": channel, "address": {"repository": repository, "number": "7"}}
        await self.metadata.create(
            thread_id,
            kind=kind,
            fields={
                CHANNEL: channel,
                REPOSITORY: repository,
                OWNER: owner,
                CREATED_AT: created_at,
                REPLY_TO: json.dumps(reply_to),
            },
        )
        return thread_id

    async def emit(self, thread_id: str, type: EventType, **data: Any) -> None:
        """A run event as the worker publishes it (and the state it sets)."""
        event = RunEvent(thread_id=thread_id, run_id="run-1", type=type, data=data)
        await self.runtime.bus.emit(event)
        await ThreadStates(self.runtime.redis, self.runtime.keys).observe(event)


SiteFactory = Callable[..., Awaitable[Site]]


@pytest.fixture
async def site_factory(
    settings: Settings, nats_client: NatsClient, bus: Bus, redis: Redis, keys: Keys, crypto_key: str
) -> AsyncIterator[SiteFactory]:
    """``await site_factory(dashboard={...}, github={...})``: a dashboard with these settings."""
    async with contextlib.AsyncExitStack() as stack:

        async def make(**sections: dict[str, Any]) -> Site:
            dashboard = {"public_url": PUBLIC_URL, "dev_login": True, "cookie_secure": False} | sections.pop(
                "dashboard", {}
            )
            sections.setdefault("crypto", {"keys": [crypto_key]})
            configured = load_settings(
                nats={"url": settings.nats.url}, redis={"url": settings.redis.url}, dashboard=dashboard, **sections
            )
            runtime = Runtime(configured, nats_client, bus, redis, keys)
            app = create_app("dashboard", runtime, [router])
            await stack.enter_async_context(app.router.lifespan_context(app))
            site = Site(configured, runtime, app)
            stack.push_async_callback(site.close)
            return site

        yield make


@pytest.fixture
async def site(site_factory: SiteFactory) -> Site:
    return await site_factory()
