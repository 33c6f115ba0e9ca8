"""What bounds a request to the reverse proxy, a push inspected for protected paths above all:
its size, sent and decoded, and the time its head and its body take to arrive."""

from __future__ import annotations

import asyncio
import gzip
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from drydock.config import Settings
from drydock.credentials import ProxyCredentials
from drydock.roles import Role
from services.credential_proxy.server import Listening
from tests.credentials.conftest import REPOSITORY
from tests.credentials.sandbox_side import handle_for
from tests.fakes.git_server import GitServer
from tests.waiting import eventually

LIMIT = 64 * 1024
READ_TIMEOUT = 1.0


@pytest.fixture
def credential_settings(credential_settings: Settings) -> Settings:
    section = credential_settings.proxy.model_copy(
        update={"max_inspected_push": LIMIT, "read_timeout": timedelta(seconds=READ_TIMEOUT)}
    )
    return credential_settings.model_copy(update={"proxy": section})


def pkt(text: bytes) -> bytes:
    return f"{len(text) + 4:04x}".encode() + text


async def _push(
    proxy: Listening,
    credentials: ProxyCredentials,
    tmp_path: Path,
    thread_id: str,
    body: bytes,
    headers: dict[str, str],
) -> httpx.Response:
    grant = await credentials.issue(
        handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=REPOSITORY
    )
    async with httpx.AsyncClient(timeout=60) as client:
        return await client.post(
            f"{proxy.url}/g/{grant.token}/git/{REPOSITORY}.git/git-receive-pack",
            content=body,
            headers={"Content-Type": "application/x-git-receive-pack-request", **headers},
        )


class TestSize:
    async def test_a_gzip_body_that_decodes_past_the_limit_is_413(
        self, proxy: Listening, credentials: ProxyCredentials, git_upstream: GitServer, tmp_path: Path, thread_id: str
    ) -> None:
        command = pkt(f"{'0' * 40} {'1' * 40} refs/heads/bomb\0report-status\n".encode()) + b"0000"
        body = gzip.compress(command + bytes(16 * LIMIT))
        assert len(body) < LIMIT
        seen = len(git_upstream.requests)
        answer = await _push(proxy, credentials, tmp_path, thread_id, body, {"Content-Encoding": "gzip"})
        assert answer.status_code == 413, answer.text
        assert "larger than the proxy inspects" in answer.text
        assert git_upstream.requests[seen:] == []
        assert list(proxy.context.mirror_root.glob("body-*")) == []


async def _closed_after(proxy: Listening, request: bytes) -> bytes:
    """What the proxy answers a request that stops arriving, read until it closes the connection."""
    address = urlsplit(proxy.url)
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout=10 * READ_TIMEOUT)
    finally:
        writer.close()


class TestReadDeadline:
    async def test_an_incomplete_head_is_closed(self, proxy: Listening) -> None:
        answer = await _closed_after(proxy, b"GET /healthz HTTP/1.1\r\nHost: proxy\r\n")
        assert answer == b""

    async def test_a_push_body_that_stops_arriving_is_closed_and_its_spool_removed(
        self, proxy: Listening, credentials: ProxyCredentials, git_upstream: GitServer, tmp_path: Path, thread_id: str
    ) -> None:
        grant = await credentials.issue(
            handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=REPOSITORY
        )
        seen = len(git_upstream.requests)
        head = (
            f"POST /g/{grant.token}/git/{REPOSITORY}.git/git-receive-pack HTTP/1.1\r\nHost: proxy\r\n"
            "Content-Type: application/x-git-receive-pack-request\r\nContent-Length: 60000\r\n\r\n"
        )
        answer = await _closed_after(proxy, head.encode() + b"0098")
        assert b"200 OK" not in answer
        await eventually(lambda: not list(proxy.context.mirror_root.glob("body-*")), within=10, what="spool removed")
        assert git_upstream.requests[seen:] == []
