"""What every area of the GitHub client shares: one githubkit ``GitHub`` over one HTTP
connection pool, the REST API version, the authorization of each request, and sending.

``api_url`` is ``https://api.github.com`` or a GitHub Enterprise Server's ``https://HOST/api/v3``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import aiohttp
import httpx
from githubkit import BaseAuthStrategy, GitHub, Response
from githubkit.exception import RequestError, RequestFailed

from drydock.config import GithubSettings
from drydock.errors import ChannelNotConfigured, OutboundFailed, describe
from drydock.github.app_jwt import AppBearer
from drydock.github.pagination import pages
from drydock.github.responses import Answer
from drydock.infra.tls import client_context
from drydock.telemetry.tracing import aiohttp_tracing

if TYPE_CHECKING:
    from githubkit import GitHubCore

    from drydock.github.installations import Installation

API_VERSION = "2022-11-28"
"""The REST API version every request names; githubkit's typed methods default to the newest,
which GitHub Enterprise Server releases may not support yet."""
USER_AGENT = "drydock"
VERSION_HEADER = {"X-GitHub-Api-Version": API_VERSION}
READ_CONNECTIONS = 32
"""Connections kept for reads (:meth:`GithubSession.get`)."""


@dataclass
class _Authorization(BaseAuthStrategy):
    """Send ``Authorization: header()`` on every request: the App's JWT (githubkit's
    ``AppAuthStrategy`` needs PyJWT, which is not installed) or a caller's header verbatim."""

    header: Callable[[], str]

    def get_auth_flow(self, github: GitHubCore[Any]) -> httpx.Auth:
        return _HeaderAuth(self.header)


class _HeaderAuth(httpx.Auth):
    def __init__(self, header: Callable[[], str]) -> None:
        self._header = header

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self._header()
        yield request


class _Pooled(httpx.AsyncBaseTransport):
    """githubkit opens and closes an ``httpx`` client for every request made outside
    ``async with``: each would build its own SSL context and pool (githubkit#285), and closing it
    closes the transport it was given. This transport sends through one long-lived client."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._client.send(request, stream=True)


def _no_app() -> NoReturn:
    raise ChannelNotConfigured("GitHub App not configured: set DRYDOCK_GITHUB_APP_ID and _PRIVATE_KEY")


class GithubSession:
    """The shared part of :class:`~drydock.github.GithubClient`: construction, sending and closing.

    ``require_app=False`` makes a client that acts only with its callers' authorization (the
    dashboard signing people in without a GitHub App); what needs the App then raises
    :class:`~drydock.errors.ChannelNotConfigured`.
    """

    def __init__(
        self,
        settings: GithubSettings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        require_app: bool = True,
    ) -> None:
        configured = settings.app_id is not None and settings.private_key is not None
        if require_app and not configured:
            _no_app()
        self.app: AppBearer | None = None
        if settings.app_id is not None and settings.private_key is not None:
            self.app = AppBearer(settings.app_id, settings.private_key.get_secret_value())
        self.api_url = settings.api_url.rstrip("/")
        self._margin = settings.token_refresh_margin.total_seconds()
        self._http = httpx.AsyncClient(transport=transport, verify=client_context())
        self._github = GitHub(
            _Authorization(self.app.header if self.app is not None else _no_app),
            base_url=self.api_url,
            user_agent=USER_AGENT,
            timeout=settings.request_timeout,
            async_transport=_Pooled(self._http),
            # A 302 from the membership check means "not a member"; following it would ask
            # about public membership instead.
            follow_redirects=False,
            http_cache=False,
            # Retrying a POST that GitHub may have carried out could comment twice; callers retry.
            auto_retry=False,
        )
        # Reads with a caller's authorization skip githubkit and httpx: they are the autofix
        # controller's hot path, and an httpx request costs several times the CPU of aiohttp's
        # (measured: bench/bench_autofix.py). A transport given for tests carries them too.
        self._lean = transport is None
        self._timeout = settings.request_timeout
        self._reads: aiohttp.ClientSession | None = None
        self._tokens: dict[int, tuple[str, float]] = {}
        self._minting: dict[int, asyncio.Lock] = {}
        self._installations: dict[str, Installation] = {}
        """Installations by ``owner/name`` or ``org:name``; an optimization, they rarely change."""

    @property
    def configured(self) -> bool:
        """Whether the GitHub App's id and key are set, so the client can act as the App."""
        return self.app is not None

    async def aclose(self) -> None:
        await self._http.aclose()
        if self._reads is not None:
            await self._reads.close()

    def unreachable(self, error: RequestError[Exception]) -> OutboundFailed:
        """GitHub could not be reached (``status`` is ``None``)."""
        return OutboundFailed(f"GitHub at {self.api_url} unreachable: {describe(error.exc)}")

    async def answer(self, request: Awaitable[Response[Any, Any]]) -> httpx.Response:
        """GitHub's response, whatever its status; :class:`OutboundFailed` if GitHub is unreachable."""
        try:
            return (await request).raw_response
        except RequestFailed as failed:
            return failed.response.raw_response
        except RequestError as error:
            raise self.unreachable(error) from None

    @property
    def as_app(self) -> GitHub[Any]:
        """Requests signed with the App's JWT; :class:`ChannelNotConfigured` without an App."""
        if self.app is None:
            _no_app()
        return self._github

    def as_caller(self, authorization: str) -> GitHub[Any]:
        """Requests sent with the caller's ``Authorization`` header verbatim."""
        return self._github.with_auth(_Authorization(lambda: authorization))

    async def send(
        self,
        github: GitHub[Any],
        method: str,
        path: str,
        json: Any = None,
        params: dict[str, str] | None = None,
    ) -> httpx.Response:
        """One request to a path under ``api_url`` (or an absolute URL GitHub gave, a ``next`` link)."""
        return await self.answer(github.arequest(method, path, json=json, params=params, headers=VERSION_HEADER))

    def _read_session(self) -> aiohttp.ClientSession:
        """Opened on first use, as aiohttp needs the running loop."""
        if self._reads is None:
            self._reads = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self._timeout),
                connector=aiohttp.TCPConnector(limit=READ_CONNECTIONS, ttl_dns_cache=300, ssl=client_context()),
                headers={"Accept": "application/vnd.github+json", "User-Agent": USER_AGENT} | VERSION_HEADER,
                trace_configs=aiohttp_tracing(),
            )
        return self._reads

    async def get(self, authorization: str, url: str, params: dict[str, str] | None = None) -> Answer:
        """``GET`` a path under ``api_url`` (or a ``next`` link) with the caller's authorization."""
        if not self._lean:
            return Answer.of(await self.send(self.as_caller(authorization), "GET", url, params=params))
        target = url if url.startswith(("http://", "https://")) else f"{self.api_url}{url}"
        headers = {"Authorization": authorization}
        try:
            async with self._read_session().get(target, params=params, headers=headers, allow_redirects=False) as got:
                content = await got.read()
                next_link = got.links.get("next")
        except (aiohttp.ClientError, TimeoutError) as error:
            raise OutboundFailed(f"GitHub at {self.api_url} unreachable: {describe(error)}") from None
        return Answer(got.status, content, str(next_link["url"]) if next_link is not None else None)

    async def listed(
        self,
        authorization: str,
        path: str,
        doing: str,
        *,
        limit: int,
        field: str | None = None,
        params: dict[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        """Every item of a listing read with the caller's authorization (:func:`pages`)."""

        async def fetch(url: str, query: dict[str, str] | None) -> Answer:
            return await self.get(authorization, url, query)

        return await pages(fetch, path, doing, limit=limit, field=field, params=params)
