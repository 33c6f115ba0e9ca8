"""Incomplete requests on a raw socket: partial headers, a body shorter than declared, a chunk
larger than is ever sent, nothing at all. The real ingress, served as the services serve it,
closes each connection once the read deadline (``DRYDOCK_HTTP_READ_TIMEOUT``) has passed, and
publishes nothing; a complete request's connection stays open for the next one."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

from tests.fakes import signing
from tests.fakes.github import webhooks
from tests.ingress.conftest import GITHUB_SECRET, RunningIngress, StartIngress

READ_TIMEOUT = 1.0
SLACK = 3.0
"""How much later than the deadline the close may come on a loaded machine."""


async def connect(running: RunningIngress) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    address = urlsplit(str(running.client.base_url))
    assert address.hostname == "127.0.0.1"
    assert address.port is not None
    return await asyncio.open_connection(address.hostname, address.port)


async def closed_after(running: RunningIngress, sent: bytes) -> tuple[float, bytes]:
    """Send ``sent`` and nothing more; how long until the server closed, and what it answered."""
    reader, writer = await connect(running)
    started = time.monotonic()
    try:
        writer.write(sent)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), READ_TIMEOUT + SLACK)
        return time.monotonic() - started, answer
    finally:
        writer.close()


def head(path: str, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class TestIncompleteRequests:
    async def test_partial_headers(self, start_ingress: StartIngress) -> None:
        async with start_ingress(http={"read_timeout": READ_TIMEOUT}) as running:
            before = await running.stream_marks()
            took, answer = await closed_after(running, b"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\nX-")
            assert READ_TIMEOUT * 0.9 <= took <= READ_TIMEOUT + SLACK
            assert answer.startswith(b"HTTP/1.1 408 ")
            assert await running.stream_marks() == before

    async def test_a_connection_that_sends_nothing(self, start_ingress: StartIngress) -> None:
        async with start_ingress(http={"read_timeout": READ_TIMEOUT}) as running:
            took, answer = await closed_after(running, b"")
            assert READ_TIMEOUT * 0.9 <= took <= READ_TIMEOUT + SLACK
            assert answer.startswith(b"HTTP/1.1 408 ")

    async def test_a_body_shorter_than_declared(self, start_ingress: StartIngress, repo: str) -> None:
        request = signing.github(GITHUB_SECRET, "issue_comment", webhooks.issue_comment("acme", repo, 1, "@drydock"))
        headers = {**request.headers, "Content-Length": str(len(request.body))}
        async with start_ingress(http={"read_timeout": READ_TIMEOUT}) as running:
            before = await running.stream_marks()
            took, _ = await closed_after(running, head(request.path, headers) + request.body[:-10])
            assert READ_TIMEOUT * 0.9 <= took <= READ_TIMEOUT + SLACK
            assert await running.stream_marks() == before

    async def test_an_answer_sent_before_the_body_is_the_only_answer(self, start_ingress: StartIngress) -> None:
        headers = {"Content-Type": "application/json", "Content-Length": "100"}
        async with start_ingress(http={"read_timeout": READ_TIMEOUT}) as running:
            took, answer = await closed_after(running, head("/no-such-path", headers) + b"{")
            assert READ_TIMEOUT * 0.9 <= took <= READ_TIMEOUT + SLACK
            assert answer.startswith(b"HTTP/1.1 404 ")
            assert answer.count(b"HTTP/1.1 ") == 1

    async def test_a_huge_declared_chunk(self, start_ingress: StartIngress) -> None:
        headers = {"Content-Type": "application/json", "Transfer-Encoding": "chunked", "X-GitHub-Event": "ping"}
        async with start_ingress(http={"read_timeout": READ_TIMEOUT}) as running:
            took, _ = await closed_after(running, head("/webhooks/github", headers) + b"7fffffff\r\n{")
            assert READ_TIMEOUT * 0.9 <= took <= READ_TIMEOUT + SLACK


class TestCompleteRequests:
    async def test_a_kept_alive_connection_outlives_the_deadline(self, start_ingress: StartIngress) -> None:
        ping = signing.github(GITHUB_SECRET, "ping", webhooks.ping())
        headers = {**ping.headers, "Content-Length": str(len(ping.body))}
        async with start_ingress(http={"read_timeout": READ_TIMEOUT}) as running:
            reader, writer = await connect(running)
            try:
                for _ in range(2):
                    writer.write(head(ping.path, headers) + ping.body)
                    await writer.drain()
                    status = await asyncio.wait_for(reader.readline(), READ_TIMEOUT + SLACK)
                    assert status.startswith(b"HTTP/1.1 200 ")
                    await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT + SLACK)
                    await asyncio.wait_for(reader.readuntil(b"}"), READ_TIMEOUT + SLACK)
                    await asyncio.sleep(READ_TIMEOUT * 1.5)
            finally:
                writer.close()
