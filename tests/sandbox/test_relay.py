"""The daemon's relay: its argument, and bytes carried both ways to a Unix socket and back."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from drydock.sandbox.daemon.relay import Relay, start_relay


class TestRelayArgument:
    @pytest.mark.parametrize(
        ("raw", "relay"),
        [
            ("127.0.0.1:8081=/run/p/reverse.sock", Relay("127.0.0.1", 8081, Path("/run/p/reverse.sock"))),
            ("[::1]:8082=/run/p/egress.sock", Relay("::1", 8082, Path("/run/p/egress.sock"))),
        ],
    )
    def test_round_trip(self, raw: str, relay: Relay) -> None:
        assert Relay.parse(raw) == relay
        assert relay.argument() == raw

    @pytest.mark.parametrize("raw", ["127.0.0.1:8081", "127.0.0.1=/x", ":80=/x", "127.0.0.1:0=/x", "h:99999=/x"])
    def test_malformed_is_refused(self, raw: str) -> None:
        with pytest.raises(ValueError, match="is not HOST:PORT=PATH"):
            Relay.parse(raw)


async def test_bytes_go_both_ways_and_end_of_input_is_passed_on(tmp_path: Path) -> None:
    received: list[bytes] = []

    async def upper(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read()  # until the relay passes the client's end of input on
        received.append(data)
        writer.write(data.upper())
        await writer.drain()
        writer.close()

    socket_path = tmp_path / "reverse.sock"
    upstream = await asyncio.start_unix_server(upper, path=str(socket_path))
    relay = await start_relay(Relay("127.0.0.1", 0, socket_path))
    port = relay.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        payload = b"git-upload-pack " * 10_000
        writer.write(payload)
        writer.write_eof()
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert answer == payload.upper()
        assert received == [payload]
    finally:
        relay.close()
        upstream.close()


async def test_a_missing_proxy_socket_closes_the_connection(tmp_path: Path) -> None:
    relay = await start_relay(Relay("127.0.0.1", 0, tmp_path / "absent.sock"))
    port = relay.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
    finally:
        relay.close()
