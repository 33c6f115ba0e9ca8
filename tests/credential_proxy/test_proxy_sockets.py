"""The credential proxy's Unix sockets, which local sandboxes reach it through."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from drydock.sandbox.proxy_sockets import (
    EGRESS_SOCKET,
    REVERSE_SOCKET,
    SocketDirectoryRefused,
    prepare_socket_directory,
)
from services.credential_proxy.server import Listening, serving


async def _health(socket_path: Path) -> int:
    transport = httpx.AsyncHTTPTransport(uds=str(socket_path))
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
        return (await client.get("/healthz")).status_code


class TestTheSocketDirectory:
    async def test_both_sockets_serve_while_the_proxy_runs(self, proxy: Listening) -> None:
        assert sorted(path.name for path in proxy.socket_dir.iterdir()) == [EGRESS_SOCKET, REVERSE_SOCKET]
        assert await _health(proxy.socket_dir / REVERSE_SOCKET) == 200
        assert proxy.socket_dir.stat().st_mode & 0o777 == 0o700

    async def test_a_restart_replaces_the_sockets_and_the_old_proxy_leaves_the_new_ones(self, proxy: Listening) -> None:
        """A rolling restart: the new proxy starts, then the old one stops."""
        runtime = proxy.context.runtime
        section = runtime.settings.proxy.model_copy(update={"port": 0, "egress_port": 0})
        other = replace(runtime, settings=runtime.settings.model_copy(update={"proxy": section}))
        reverse = proxy.socket_dir / REVERSE_SOCKET
        old_proxy = serving(other)
        await old_proxy.__aenter__()
        old_inode = reverse.stat().st_ino
        async with serving(other):
            new_inode = reverse.stat().st_ino
            assert new_inode != old_inode
            await old_proxy.__aexit__(None, None, None)
            assert reverse.stat().st_ino == new_inode
            assert await _health(reverse) == 200
        assert not reverse.exists()

    def test_a_file_in_its_place_is_refused(self, tmp_path: Path) -> None:
        squatter = tmp_path / "proxy"
        squatter.write_text("not a directory")
        with pytest.raises(SocketDirectoryRefused, match="not a directory owned by this user"):
            prepare_socket_directory(squatter)

    def test_a_loose_mode_is_tightened(self, tmp_path: Path) -> None:
        directory = tmp_path / "proxy"
        directory.mkdir(mode=0o777)
        directory.chmod(0o777)
        assert prepare_socket_directory(directory).stat().st_mode & 0o777 == 0o700


async def test_health_over_the_socket_matches_tcp(proxy: Listening) -> None:
    async with httpx.AsyncClient(base_url=proxy.url) as client:
        tcp = (await client.get("/healthz")).status_code
    assert await asyncio.wait_for(_health(proxy.socket_dir / REVERSE_SOCKET), 10) == tcp
