"""The egress proxy: CONNECT and absolute-form requests to allowlisted hosts only, attributed
to a thread by the sandbox's grant. The hosts are loopback servers."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import socket
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import httpx
import pytest
from aiohttp import web
from nats.aio.client import Client as NatsClient
from redis.asyncio import Redis
from structlog.testing import capture_logs

from drydock.bus import Bus
from drydock.config import Settings
from drydock.credentials import GrantStore
from drydock.infra import addresses
from drydock.infra.addresses import IPAddress, Resolver
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.roles import Role
from drydock.runtime import Runtime
from services.credential_proxy import egress as egress_module
from services.credential_proxy.server import Listening, serving


async def _site(text: str) -> tuple[web.AppRunner, int]:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text=text)

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    return runner, sock.getsockname()[1]


@pytest.fixture
async def hosts() -> AsyncIterator[tuple[int, int]]:
    """Ports of two loopback sites: the first is listed, the second is not."""
    listed, listed_port = await _site("listed host\n")
    unlisted, unlisted_port = await _site("unlisted host\n")
    yield listed_port, unlisted_port
    await listed.cleanup()
    await unlisted.cleanup()


ServeAllowing = Callable[..., contextlib.AbstractAsyncContextManager[Listening]]


@pytest.fixture
def serve_allowing(
    credential_settings: Settings, nats_client: NatsClient, bus: Bus, redis: Redis, keys: Keys
) -> ServeAllowing:
    """``serve_allowing(entries, resolver)``: the proxy with ``entries`` as its egress allowlist."""

    def serve(
        entries: list[str], resolver: Resolver = addresses.resolve
    ) -> contextlib.AbstractAsyncContextManager[Listening]:
        section = credential_settings.proxy.model_copy(update={"egress_allowlist": entries})
        settings = credential_settings.model_copy(update={"proxy": section})
        return serving(Runtime(settings, nats_client, bus, redis, keys), resolver=resolver)

    return serve


@pytest.fixture
async def egress(serve_allowing: ServeAllowing, hosts: tuple[int, int]) -> AsyncIterator[Listening]:
    async with serve_allowing([f"127.0.0.1:{hosts[0]}"]) as listening:
        yield listening


@pytest.fixture
async def grant_token(redis: Redis, keys: Keys, server_keys: ServerKeys, thread_id: str) -> str:
    store = GrantStore(redis, keys, server_keys)
    issued = await store.issue(
        role=Role.REVIEWER, sandbox_id="s1", thread_id=thread_id, repository=None, ttl=timedelta(hours=1)
    )
    return issued.token


def _proxy_url(egress: Listening, token: str) -> str:
    return egress.egress_url.replace("http://", f"http://drydock:{token}@")


async def _curl_tunnel(proxy: str, target: str) -> tuple[int, str, str]:
    """``curl`` through a CONNECT tunnel, as a package manager in the sandbox would go."""
    process = await asyncio.create_subprocess_exec(
        "curl", "-sS", "--max-time", "10", "--proxytunnel", "-x", proxy, target,
        env={"PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


class TestConnect:
    async def test_listed_host_is_tunnelled(self, egress: Listening, hosts: tuple[int, int], grant_token: str) -> None:
        code, out, err = await _curl_tunnel(_proxy_url(egress, grant_token), f"http://127.0.0.1:{hosts[0]}/")
        assert (code, out) == (0, "listed host\n"), err

    async def test_unlisted_host_is_refused_and_logged_with_the_thread(
        self, egress: Listening, hosts: tuple[int, int], grant_token: str, thread_id: str
    ) -> None:
        with capture_logs() as logs:
            code, out, err = await _curl_tunnel(_proxy_url(egress, grant_token), f"http://127.0.0.1:{hosts[1]}/")
        assert code != 0
        assert "403" in err
        assert "unlisted host" not in out
        denials = [entry for entry in logs if entry["event"] == "egress denied"]
        assert len(denials) == 1
        assert denials[0]["thread_id"] == thread_id
        assert denials[0]["port"] == hosts[1]


async def _raw(egress: Listening, data: bytes) -> bytes:
    """The egress proxy's whole answer to ``data``, read until it closes the connection."""
    host, port = egress.egress_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()


def _authorization(token: str) -> str:
    return "Proxy-Authorization: Basic " + base64.b64encode(f"drydock:{token}".encode()).decode()


@pytest.fixture
async def recording_host() -> AsyncIterator[tuple[int, list[tuple[str, str]]]]:
    """A loopback site that records the Host and path of each request it answers."""
    seen: list[tuple[str, str]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append((request.headers.get("Host", ""), request.path))
        return web.Response(text="recorded\n")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    yield sock.getsockname()[1], seen
    await runner.cleanup()


class TestConnectPorts:
    async def test_a_tunnel_to_port_80_of_a_host_entry_is_refused(
        self, serve_allowing: ServeAllowing, grant_token: str
    ) -> None:
        async with serve_allowing(["localhost"]) as egress:
            answer = await _raw(
                egress, f"CONNECT localhost:80 HTTP/1.1\r\n{_authorization(grant_token)}\r\n\r\n".encode()
            )
        assert answer.startswith(b"HTTP/1.1 403")
        assert b"a CONNECT tunnel reaches port 443 or a port an egress allowlist entry names" in answer


class TestAbsoluteForm:
    async def test_one_request_goes_with_the_destination_as_its_host(
        self, serve_allowing: ServeAllowing, recording_host: tuple[int, list[tuple[str, str]]], grant_token: str
    ) -> None:
        port, seen = recording_host
        first = (
            f"POST http://127.0.0.1:{port}/first HTTP/1.1\r\nHost: internal-admin.svc.cluster.local\r\n"
            f"{_authorization(grant_token)}\r\nContent-Length: 4\r\nConnection: keep-alive\r\n\r\nbody"
        )
        second = "GET /second HTTP/1.1\r\nHost: internal-admin.svc.cluster.local\r\n\r\n"
        async with serve_allowing([f"127.0.0.1:{port}"]) as egress:
            answer = await _raw(egress, (first + second).encode())
        assert answer.startswith(b"HTTP/1.1 200")
        assert seen == [(f"127.0.0.1:{port}", "/first")]

    async def test_a_chunked_body_is_refused(self, egress: Listening, hosts: tuple[int, int], grant_token: str) -> None:
        request = (
            f"POST http://127.0.0.1:{hosts[0]}/ HTTP/1.1\r\n{_authorization(grant_token)}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        )
        assert (await _raw(egress, request.encode())).startswith(b"HTTP/1.1 411")

    async def test_listed_and_unlisted_hosts(self, egress: Listening, hosts: tuple[int, int], grant_token: str) -> None:
        async with httpx.AsyncClient(proxy=_proxy_url(egress, grant_token), trust_env=False) as client:
            allowed = await client.get(f"http://127.0.0.1:{hosts[0]}/")
            refused = await client.get(f"http://127.0.0.1:{hosts[1]}/")
        assert (allowed.status_code, allowed.text) == (200, "listed host\n")
        assert refused.status_code == 403
        assert f"127.0.0.1:{hosts[1]} is not on the egress allowlist" in refused.text


class TestProxyAuthentication:
    async def test_no_grant_is_407(self, egress: Listening, hosts: tuple[int, int]) -> None:
        async with httpx.AsyncClient(proxy=egress.egress_url, trust_env=False) as client:
            response = await client.get(f"http://127.0.0.1:{hosts[0]}/")
        assert response.status_code == 407
        assert response.headers["Proxy-Authenticate"].startswith("Basic")

    async def test_revoked_grant_is_407_with_the_reason(
        self,
        egress: Listening,
        hosts: tuple[int, int],
        grant_token: str,
        redis: Redis,
        keys: Keys,
        server_keys: ServerKeys,
    ) -> None:
        await GrantStore(redis, keys, server_keys).revoke(grant_token)
        async with httpx.AsyncClient(proxy=_proxy_url(egress, grant_token), trust_env=False) as client:
            response = await client.get(f"http://127.0.0.1:{hosts[0]}/")
        assert response.status_code == 407
        assert "credential-proxy grant revoked" in response.text

    @pytest.mark.parametrize("request_line", ["CONNECT [localhost]:443", "CONNECT [::1:443", "GET http://[bad/"])
    async def test_an_unreadable_destination_is_400(
        self, egress: Listening, grant_token: str, request_line: str
    ) -> None:
        answer = await _raw(egress, f"{request_line} HTTP/1.1\r\n{_authorization(grant_token)}\r\n\r\n".encode())
        assert answer.startswith(b"HTTP/1.1 400")
        assert b"invalid host or port" in answer

    async def test_malformed_request_is_400(self, egress: Listening) -> None:
        host, port = egress.egress_url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"NONSENSE\r\n\r\n")
        await writer.drain()
        status_line = await reader.readline()
        writer.close()
        assert status_line.startswith(b"HTTP/1.1 400")


LOOPBACK = [ipaddress.ip_address("127.0.0.1")]


async def _names_of_this_machine(host: str, port: int) -> list[IPAddress]:
    """A resolver that answers loopback for every name under ``example.test``, which the system
    resolver does not know: a connection to one shows that the vetted answer was used."""
    if host.endswith(".example.test"):
        return LOOPBACK
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


@pytest.fixture
async def wildcard_egress(serve_allowing: ServeAllowing, hosts: tuple[int, int]) -> AsyncIterator[Listening]:
    """The listed site allowed by a wildcard (``*.example.test``) and by name (``localhost``)."""
    async with serve_allowing(
        [f"*.example.test:{hosts[0]}", f"localhost:{hosts[0]}"], _names_of_this_machine
    ) as listening:
        yield listening


class TestWildcardEntriesReachPublicAddressesOnly:
    async def test_a_name_under_a_wildcard_that_resolves_to_loopback_is_refused(
        self, wildcard_egress: Listening, hosts: tuple[int, int], grant_token: str, thread_id: str
    ) -> None:
        with capture_logs() as logs:
            code, out, err = await _curl_tunnel(
                _proxy_url(wildcard_egress, grant_token), f"http://site.example.test:{hosts[0]}/"
            )
        assert code != 0
        assert "403" in err
        assert "listed host" not in out
        [denial] = [entry for entry in logs if entry["event"] == "egress denied"]
        assert denial["thread_id"] == thread_id
        assert "site.example.test resolves to a non-public address (127.0.0.1)" in denial["reason"]

    async def test_the_refusal_says_why_and_how_to_allow_it(
        self, wildcard_egress: Listening, hosts: tuple[int, int], grant_token: str
    ) -> None:
        async with httpx.AsyncClient(proxy=_proxy_url(wildcard_egress, grant_token), trust_env=False) as client:
            refused = await client.get(f"http://mirror.example.test:{hosts[0]}/")
        assert refused.status_code == 403
        assert "a wildcard entry of the egress allowlist reaches public addresses only" in refused.text

    async def test_a_host_named_by_an_entry_is_reached_wherever_it_resolves(
        self, wildcard_egress: Listening, hosts: tuple[int, int], grant_token: str
    ) -> None:
        code, out, err = await _curl_tunnel(_proxy_url(wildcard_egress, grant_token), f"http://localhost:{hosts[0]}/")
        assert (code, out) == (0, "listed host\n"), err

    async def test_a_public_answer_is_connected_to_as_vetted(
        self,
        wildcard_egress: Listening,
        hosts: tuple[int, int],
        grant_token: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        # Loopback stands in for a public address: this machine may contact no other.
        monkeypatch.setattr(egress_module, "non_public", lambda address: address not in LOOPBACK)
        code, out, err = await _curl_tunnel(
            _proxy_url(wildcard_egress, grant_token), f"http://packages.example.test:{hosts[0]}/"
        )
        assert (code, out) == (0, "listed host\n"), err
