from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import AsyncIterator
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI, Request

from drydock.config import Settings, ToolSettings
from drydock.infra.addresses import IPAddress
from drydock.tools import fetch_url
from drydock.tools.netguard import FetchError, Refused, check_destination, guarded_fetch
from tests.fakes.loopback import LoopbackServer
from tests.tools.conftest import MakeContext, echoed, with_tools

PUBLIC = "93.184.215.14"
"""A public address (example.com's); never contacted, :class:`Routed` delivers it to the site."""


class Routed(httpx.AsyncBaseTransport):
    """Stands in for the internet: requests to :data:`PUBLIC` reach the loopback site (on the
    URL's port, or on ``port`` when given)."""

    def __init__(self, port: int | None = None) -> None:
        self._port = port
        self._inner = httpx.AsyncHTTPTransport()
        self.connected: list[str] = []
        """The host of every request sent, as the client would connect to it."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.connected.append(request.url.host)
        if request.url.host == PUBLIC:
            request = httpx.Request(
                request.method,
                request.url.copy_with(host="127.0.0.1", port=self._port or request.url.port),
                headers=request.headers,
                stream=request.stream,
                extensions=request.extensions,
            )
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.fixture
async def routed() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=Routed()) as client:
        yield client


def port_of(site: LoopbackServer) -> str:
    return site.base_url.rsplit(":", 1)[1]


class TestDestinations:
    async def test_a_name_resolving_to_loopback_is_refused(self) -> None:
        with pytest.raises(Refused, match=r"localhost resolves to a non-public address \(.*127\.0\.0\.1"):
            await check_destination(httpx.URL("http://localhost:8080/"), allow_private=False)

    async def test_the_flag_allows_it(self) -> None:
        await check_destination(httpx.URL("http://localhost:8080/"), allow_private=True)

    @pytest.mark.parametrize(
        "host",
        [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "224.0.0.1",
            "240.0.0.1",
            "0.0.0.0",
            "[::1]",
            "[fe80::1]",
            "[fd00::1]",
            "[::ffff:127.0.0.1]",
        ],
    )
    async def test_non_public_literals_are_refused(self, host: str) -> None:
        with pytest.raises(Refused, match="non-public address"):
            await check_destination(httpx.URL(f"http://{host}/"), allow_private=False)

    async def test_a_public_literal_passes(self) -> None:
        await check_destination(httpx.URL(f"https://{PUBLIC}/"), allow_private=False)
        await check_destination(httpx.URL("https://[2606:4700:4700::1111]/"), allow_private=False)

    @pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://example.com/"])
    async def test_other_schemes_are_refused_even_with_the_flag(self, url: str) -> None:
        with pytest.raises(Refused, match="only http and https"):
            await check_destination(httpx.URL(url), allow_private=True)

    async def test_an_unknown_name_is_reported(self) -> None:
        with pytest.raises(FetchError, match=r"could not resolve drydock-test\.invalid"):
            await check_destination(httpx.URL("http://drydock-test.invalid/"), allow_private=False)


class TestRedirectHops:
    async def test_a_redirect_from_a_public_address_to_loopback_is_refused(
        self, make_context: MakeContext, routed: httpx.AsyncClient, site: LoopbackServer
    ) -> None:
        context = dataclasses.replace(make_context(), http=routed)
        tool = fetch_url.build(context)
        inside = f"http://localhost:{port_of(site)}/notes.txt"
        answer = await tool.ainvoke({"url": f"http://{PUBLIC}:{port_of(site)}/redirect?to={quote(inside)}"})
        assert answer.startswith(f"refused {inside}: localhost resolves to a non-public address")

    async def test_the_public_hop_itself_is_fetched(
        self, make_context: MakeContext, routed: httpx.AsyncClient, site: LoopbackServer
    ) -> None:
        context = dataclasses.replace(make_context(), http=routed)
        answer = await fetch_url.build(context).ainvoke({"url": f"http://{PUBLIC}:{port_of(site)}/notes.txt"})
        assert answer.endswith("line one\nline two\n")

    async def test_a_redirect_to_a_file_url_is_refused(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        context = make_context(with_tools(settings, allow_private_addresses=True))
        answer = await fetch_url.build(context).ainvoke({"url": f"{site.base_url}/redirect?to=file:///etc/passwd"})
        assert answer.startswith("refused file:")
        assert answer.endswith("/etc/passwd: only http and https URLs can be fetched")


class TestRedirectedRequests:
    async def test_credentials_stay_with_their_origin(self, site: LoopbackServer) -> None:
        tools = ToolSettings(allow_private_addresses=True)
        elsewhere = f"http://localhost:{port_of(site)}/echo"
        async with httpx.AsyncClient() as http:
            fetched = await guarded_fetch(
                http,
                "GET",
                f"{site.base_url}/redirect?to={quote(elsewhere)}",
                tools=tools,
                headers={"Authorization": "Bearer model-given", "X-Api-Key": "k"},
            )
        headers = echoed(fetched.body.decode())["headers"]
        assert "authorization" not in headers
        assert headers["x-api-key"] == "k"

    async def test_credentials_follow_a_same_origin_redirect(self, site: LoopbackServer) -> None:
        tools = ToolSettings(allow_private_addresses=True)
        async with httpx.AsyncClient() as http:
            fetched = await guarded_fetch(
                http, "GET", f"{site.base_url}/redirect?to=/echo", tools=tools, headers={"Authorization": "Bearer t"}
            )
        assert echoed(fetched.body.decode())["headers"]["authorization"] == "Bearer t"

    async def test_see_other_turns_a_post_into_a_get_without_body(self, site: LoopbackServer) -> None:
        tools = ToolSettings(allow_private_addresses=True)
        async with httpx.AsyncClient() as http:
            fetched = await guarded_fetch(
                http,
                "POST",
                f"{site.base_url}/redirect?to=/echo&status=303",
                tools=tools,
                headers={"content-type": "application/json"},
                content=b"{}",
            )
        request = echoed(fetched.body.decode())
        assert (request["method"], request["body"]) == ("GET", "")
        assert "content-type" not in request["headers"]

    async def test_a_temporary_redirect_keeps_the_method_and_body(self, site: LoopbackServer) -> None:
        tools = ToolSettings(allow_private_addresses=True)
        async with httpx.AsyncClient() as http:
            fetched = await guarded_fetch(
                http, "POST", f"{site.base_url}/redirect?to=/echo&status=307", tools=tools, content=b"{}"
            )
        request = echoed(fetched.body.decode())
        assert (request["method"], request["body"]) == ("POST", "{}")


class Rebinding:
    """A resolver whose name answers :data:`PUBLIC` for its first ``honest`` lookups and
    loopback after that, as a DNS rebinding attacker's would."""

    def __init__(self, honest: int = 1) -> None:
        self.honest = honest
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        self.lookups.append(host)
        answer = PUBLIC if len(self.lookups) <= self.honest else "127.0.0.1"
        return [ipaddress.ip_address(answer)]


@pytest.fixture
async def victim() -> AsyncIterator[tuple[LoopbackServer, list[str]]]:
    """A loopback service the rebinding aims at; the list holds the paths it was asked for."""
    hits: list[str] = []
    app = FastAPI()

    @app.get("/{path:path}")
    async def anything(request: Request) -> dict[str, str]:
        hits.append(request.url.path)
        return {"secret": "internal"}

    async with LoopbackServer(app) as server:
        yield server, hits


class TestRebinding:
    async def test_the_request_goes_to_the_vetted_address_not_to_a_second_answer(
        self, site: LoopbackServer, victim: tuple[LoopbackServer, list[str]]
    ) -> None:
        server, hits = victim
        transport = Routed(int(port_of(site)))
        resolver = Rebinding()
        # The system resolves localhost to loopback: a client that resolves the name again reaches the victim.
        async with httpx.AsyncClient(transport=transport) as http:
            fetched = await guarded_fetch(
                http, "GET", f"http://localhost:{port_of(server)}/echo", tools=ToolSettings(), resolver=resolver
            )
        assert hits == []
        assert transport.connected == [PUBLIC]
        assert resolver.lookups == ["localhost"]
        assert echoed(fetched.body.decode())["headers"]["host"] == f"localhost:{port_of(server)}"
        assert str(fetched.url) == f"http://localhost:{port_of(server)}/echo"

    async def test_every_redirect_hop_goes_to_its_vetted_address(
        self, site: LoopbackServer, victim: tuple[LoopbackServer, list[str]]
    ) -> None:
        server, hits = victim
        transport = Routed(int(port_of(site)))
        resolver = Rebinding(honest=2)
        async with httpx.AsyncClient(transport=transport) as http:
            fetched = await guarded_fetch(
                http,
                "GET",
                f"http://localhost:{port_of(server)}/redirect?to=/echo",
                tools=ToolSettings(),
                resolver=resolver,
            )
        assert hits == []
        assert transport.connected == [PUBLIC, PUBLIC]
        assert echoed(fetched.body.decode())["url"].endswith("/echo")

    async def test_a_hop_whose_lookup_turns_to_loopback_is_refused_unsent(
        self, site: LoopbackServer, victim: tuple[LoopbackServer, list[str]]
    ) -> None:
        server, hits = victim
        transport = Routed(int(port_of(site)))
        async with httpx.AsyncClient(transport=transport) as http:
            with pytest.raises(Refused, match=r"localhost resolves to a non-public address \(127\.0\.0\.1\)"):
                await guarded_fetch(
                    http,
                    "GET",
                    f"http://localhost:{port_of(server)}/redirect?to=/echo",
                    tools=ToolSettings(),
                    resolver=Rebinding(honest=1),
                )
        assert hits == []
        assert transport.connected == [PUBLIC]
