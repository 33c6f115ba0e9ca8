"""``FakeGithub``: a test double of GitHub's REST API, served by uvicorn on a free loopback
port. State lives in memory (:class:`GithubState`); each area of the API is a router module,
listed once in :data:`ROUTERS`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import ModuleType, TracebackType
from typing import Any, Literal

from fastapi import FastAPI, Request, Response

from tests.fakes.github import (
    app_tokens,
    checks,
    collaborators,
    comments,
    commits,
    hook_deliveries,
    installations,
    labels,
    oauth,
    orgs,
    pulls,
    reactions,
    repos,
    reviews,
    users,
)
from tests.fakes.github.errors import GithubError, render
from tests.fakes.github.state import App, GithubState, HookDelivery, Installation, SeenRequest, UserToken
from tests.fakes.loopback import LoopbackServer

ROUTERS: tuple[ModuleType, ...] = (
    app_tokens,
    repos,
    comments,
    reactions,
    checks,
    orgs,
    pulls,
    reviews,
    commits,
    labels,
    collaborators,
    oauth,
    users,
    installations,
    hook_deliveries,
)
"""Every router module of the fake; each exposes ``router``. Add new API areas here."""


def create_app(github: GithubState) -> FastAPI:
    app = FastAPI(title="Fake GitHub")
    app.state.github = github
    app.add_exception_handler(GithubError, render)

    @app.middleware("http")
    async def record(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        github.requests.append(SeenRequest(request.method, request.url.path, request.headers.get("authorization")))
        return await call_next(request)

    for module in ROUTERS:
        app.include_router(module.router)
    return app


class FakeGithub(LoopbackServer):
    """``async with FakeGithub() as github:`` serves the fake at ``github.base_url`` (the REST
    API root, as ``https://api.github.com`` or ``https://HOST/api/v3`` would be).

    ``webhook_timeout``: seconds a webhook's receiver has to answer (GitHub allows ten).
    Redeliveries still under way when the fake stops are cancelled."""

    def __init__(self, *, host: str = "127.0.0.1", webhook_timeout: float = 10.0) -> None:
        self.state = GithubState(webhook_timeout=webhook_timeout)
        super().__init__(create_app(self.state), host=host)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        pending = list(self.state.redeliveries)
        self.state.redeliveries.clear()
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await super().__aexit__(exc_type, exc, tb)

    def create_app(self, slug: str = "drydock") -> App:
        """Register a GitHub App; its ``private_key_pem`` is what Drydock is configured with."""
        return self.state.create_app(slug)

    def install(
        self,
        app: App,
        account: str,
        repositories: list[str] | None = None,
        *,
        permissions: dict[str, str] | None = None,
    ) -> Installation:
        """Install ``app`` on ``account`` for the named repositories, or all of them (``None``)."""
        return self.state.install(app, account, repositories, permissions=permissions)

    def configure_webhook(self, app: App, url: str, secret: str) -> None:
        """Point ``app``'s webhook at ``url``; its deliveries are signed with ``secret``."""
        self.state.configure_webhook(app, url, secret)

    async def deliver_webhook(
        self, app: App, event: str, payload: dict[str, Any], *, installation_id: int | None = None
    ) -> HookDelivery:
        """Send ``event`` to ``app``'s webhook as GitHub does and return the recorded attempt;
        ``installation_id`` defaults to the payload's ``installation.id``."""
        return await hook_deliveries.deliver(self.state, app, event, payload, installation_id=installation_id)

    def webhook_deliveries(self, guid: str | None = None) -> list[HookDelivery]:
        """Every delivery attempt so far (of the delivery ``guid`` only, if given), oldest first."""
        return [found for found in self.state.hook_deliveries if guid is None or found.guid == guid]

    async def redeliveries_settled(self) -> None:
        """Wait until every redelivery asked for so far has been attempted and recorded; raises
        what a redelivery raised, other than a failed attempt (which is recorded)."""
        while self.state.redeliveries:
            pending = set(self.state.redeliveries)
            await asyncio.wait(pending)
            self.state.redeliveries -= pending
            await asyncio.gather(*pending)

    def user_token(self, login: str, repositories: list[str] | None = None) -> UserToken:
        """Register a user's OAuth token that may write to ``repositories`` (``None``: every one)."""
        return self.state.add_user_token(login, repositories)

    @property
    def requests(self) -> list[SeenRequest]:
        """Every request received so far, in order."""
        return self.state.requests

    def token_allows(self, token: str, full_name: str, *, permission: str = "contents", level: str = "read") -> bool:
        """Whether ``token`` is a live installation token that reaches ``owner/name`` with
        ``permission`` at ``level``."""
        return self.state.token_allows(token, full_name, permission=permission, level=level)

    def git_access(self, token: str, full_name: str) -> Literal["invalid", "none", "read", "write"]:
        """What git over HTTPS may do with ``token`` on ``owner/name``, as GitHub decides it:
        the ``authorize`` callback of :class:`tests.fakes.git_server.GitServer`."""
        issued = self.state.tokens.get(token)
        if issued is None or issued.expired():
            return "invalid"
        if self.token_allows(token, full_name, level="write"):
            return "write"
        if self.token_allows(token, full_name, level="read"):
            return "read"
        return "none"
