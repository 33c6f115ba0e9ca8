from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from drydock.bus import Bus, EventType, RunEvent, connect_nats, provision, topology
from drydock.bus.streams import EVENTS_STREAM
from drydock.config import NatsSettings, RedisSettings
from drydock.embedded import (
    PORTS,
    EmbeddedServer,
    PortTaken,
    embedded_infrastructure,
    free_port,
    nats_server,
    valkey_server,
)
from drydock.infra.redis import connect_redis


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def wait_gone(pids: list[int], within: float) -> list[int]:
    deadline = asyncio.get_running_loop().time() + within
    while any(alive(pid) for pid in pids) and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


def server_pids() -> dict[str, int]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    found[cmdline.read().replace(b"\0", b" ").decode(errors="replace")] = int(entry)
            except OSError:
                continue
    return found


class TestEmbeddedServers:
    async def test_stop_leaves_no_process(self) -> None:
        async with embedded_infrastructure() as urls:
            assert urls.nats is not None
            assert urls.redis is not None
            nats_port, redis_port = urls.nats.rsplit(":", 1)[1], urls.redis.rsplit(":", 1)[1]
            commands = server_pids()
            # valkey-server rewrites its command line to "valkey-server 127.0.0.1:PORT".
            pids = [pid for cmd, pid in commands.items() if f"-p {nats_port}" in cmd or f":{redis_port}" in cmd]
            assert len(pids) == 2
        assert await wait_gone(pids, within=5) == []

    async def test_a_parent_killed_with_sigkill_leaves_no_process(self, tmp_path: Path) -> None:
        script = textwrap.dedent(
            """
            import asyncio, sys
            from drydock.embedded import embedded_infrastructure

            async def main():
                async with embedded_infrastructure() as urls:
                    print("URLS", urls.nats, urls.redis, flush=True)
                    await asyncio.sleep(60)

            asyncio.run(main())
            """
        )
        # The killed parent cannot remove its temporary directory: it goes under the test's own.
        parent = await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, stdout=subprocess.PIPE, env={**os.environ, "TMPDIR": str(tmp_path)}
        )
        try:
            assert parent.stdout is not None
            line = ""
            while not line.startswith("URLS"):
                line = (await asyncio.wait_for(parent.stdout.readline(), 30)).decode()
            nats_port, redis_port = (url.rsplit(":", 1)[1] for url in line.split()[1:])
            commands = server_pids()
            pids = [pid for cmd, pid in commands.items() if f"-p {nats_port}" in cmd or f":{redis_port}" in cmd]
            assert len(pids) == 2
            parent.send_signal(signal.SIGKILL)
            await asyncio.wait_for(parent.wait(), 10)
            assert await wait_gone(pids, within=5) == []
        finally:
            if parent.returncode is None:
                parent.kill()
                await parent.wait()


class TestFreePort:
    def test_a_free_port_is_outside_the_range_outgoing_connections_take_theirs_from(self) -> None:
        low, high = (int(part) for part in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        for _ in range(20):
            port = free_port()
            assert port in PORTS
            assert not low <= port <= high
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", port))


@contextlib.contextmanager
def silent_listener(port: int | None = None) -> Iterator[int]:
    """A port held by a listener that accepts connections (the kernel completes them) and never
    answers; yields the port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As servers do: a port just left by a server still has its closed connections.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port or free_port()))
        sock.listen()
        held: int = sock.getsockname()[1]
        yield held


async def answers_as_itself(server: EmbeddedServer) -> bool:
    """A client with the server's URL (its credentials) gets an answer."""
    if server.scheme == "nats":
        nc = await connect_nats(NatsSettings(url=server.url), name="embedded-test")
        try:
            return bool(nc.is_connected)
        finally:
            await nc.close()
    redis = await connect_redis(RedisSettings(url=server.url))
    try:
        return bool(await redis.ping())
    finally:
        await redis.aclose()


class TestPortTaken:
    """Between :func:`free_port` and the server's bind another process can take the port; the
    readiness probe must not take that process for the server."""

    @pytest.mark.parametrize("make", [nats_server, valkey_server], ids=["nats", "valkey"])
    async def test_a_server_on_a_pinned_port_held_by_another_listener_says_so(
        self, tmp_path: Path, make: Callable[..., EmbeddedServer]
    ) -> None:
        with silent_listener() as port:
            server = make(tmp_path, port=port)
            with pytest.raises(PortTaken, match=f"port {port} was taken"):
                await server.start()
            assert server.process is None

    @pytest.mark.parametrize("make", [nats_server, valkey_server], ids=["nats", "valkey"])
    async def test_a_server_whose_chosen_port_is_held_by_one_of_its_kind_moves_to_another(
        self, tmp_path: Path, make: Callable[..., EmbeddedServer]
    ) -> None:
        (tmp_path / "first").mkdir()
        (tmp_path / "second").mkdir()
        first = make(tmp_path / "first")
        await first.start()
        try:
            second = make(tmp_path / "second")
            # As if the first had bound the port free_port chose for the second.
            second.port = first.port
            await second.start()
            try:
                assert second.port != first.port
                assert await answers_as_itself(second)
                assert await answers_as_itself(first)
            finally:
                await second.stop()
        finally:
            await first.stop()

    async def test_a_restart_stays_on_its_port(self, tmp_path: Path) -> None:
        server = valkey_server(tmp_path)
        await server.start()
        port = server.port
        await server.stop()
        with silent_listener(port), pytest.raises(PortTaken):
            await server.start()
        assert server.port == port


class TestDataDirectory:
    async def test_a_restart_on_the_same_directory_keeps_the_store_and_the_streams(self, tmp_path: Path) -> None:
        async with embedded_infrastructure(workdir=tmp_path) as urls:
            redis = await connect_redis(RedisSettings(url=urls.redis))
            await redis.set("kept", "yes")
            await redis.aclose()
            nc = await connect_nats(NatsSettings(url=urls.nats), name="before")
            bus = Bus(nc)
            await provision(bus.js, topology(NatsSettings()))
            await bus.emit(RunEvent(thread_id="t1", run_id="r1", type=EventType.STARTED))
            await nc.close()
        assert (tmp_path / "appendonlydir").is_dir()
        async with embedded_infrastructure(workdir=tmp_path) as urls:
            redis = await connect_redis(RedisSettings(url=urls.redis))
            assert await redis.get("kept") == "yes"
            await redis.aclose()
            nc = await connect_nats(NatsSettings(url=urls.nats), name="after")
            info = await nc.jetstream().stream_info(EVENTS_STREAM)
            await nc.close()
        assert info.state.messages == 1

    async def test_credential_files_are_private(self, tmp_path: Path) -> None:
        async with embedded_infrastructure(workdir=tmp_path) as urls:
            assert urls.nats_address is not None
            for name in ("nats.conf", "users.acl"):
                assert (tmp_path / name).stat().st_mode & 0o777 == 0o600
            commands = " ".join(server_pids())
            for password in urls.nats_passwords.values():
                assert password not in commands
