"""`drydock dev` end to end: embedded servers, every service, clean shutdown on Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import httpx
import pytest

from drydock.infra.embedded import free_port
from tests.infra.test_embedded import alive, server_pids, wait_gone


class TestDev:
    @pytest.mark.timeout(240)
    async def test_starts_everything_and_stops_cleanly_on_sigint(self, tmp_path: Path) -> None:
        port = free_port()
        environment = {k: v for k, v in os.environ.items() if not k.startswith("DRYDOCK_")}
        environment["DRYDOCK_HTTP_PORT"] = str(port)
        environment["DRYDOCK_HTTP_METRICS_PORT"] = str(free_port())
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "drydock",
            "dev",
            env=environment,
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert process.stdout is not None
        output: list[str] = []
        try:
            # One deadline for the whole start: on a loaded CI machine the imports alone can take a minute.
            try:
                async with asyncio.timeout(150):
                    while not any("ready; Ctrl-C stops everything" in line for line in output):
                        line = (await process.stdout.readline()).decode()
                        assert line, "drydock dev exited early:\n" + "".join(output)
                        output.append(line)
            except TimeoutError:
                pytest.fail("drydock dev was not ready within 150 s:\n" + "".join(output))
            text = "".join(output)
            nats_port = re.search(r"NATS nats://127\.0\.0\.1:(\d+) \(embedded\)", text)
            redis_port = re.search(r"Redis redis://127\.0\.0\.1:(\d+) \(embedded\)", text)
            assert nats_port
            assert redis_port
            assert f"web: http://127.0.0.1:{port}" in text
            assert (
                "DRYDOCK_CRYPTO_KEYS is unset: using the development key generated in .drydock/dev/crypto-key" in text
            )
            assert (tmp_path / ".drydock" / "dev" / "crypto-key").stat().st_mode & 0o777 == 0o600
            pids = [
                pid for cmd, pid in server_pids().items() if f"-p {nats_port[1]}" in cmd or f":{redis_port[1]}" in cmd
            ]
            assert len(pids) == 2
            async with httpx.AsyncClient() as client:
                for _ in range(100):
                    try:
                        response = await client.get(f"http://127.0.0.1:{port}/readyz")
                        break
                    except httpx.ConnectError:
                        await asyncio.sleep(0.05)
                assert response.json()["status"] == "ready"

            process.send_signal(signal.SIGINT)
            rest = await asyncio.wait_for(process.stdout.read(), 30)
            assert await asyncio.wait_for(process.wait(), 30) == 0
            assert "drydock: stopped" in rest.decode()
            assert await wait_gone(pids, within=5) == []
            assert not any(alive(pid) for pid in pids)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
