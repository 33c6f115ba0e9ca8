"""`drydock dev` end to end: embedded servers, every service, clean shutdown on Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from drydock.config import SandboxSettings
from drydock.dev import dev_data_dir, prepare_dev_data_dir
from drydock.embedded import free_port
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.sandbox.providers.local import DIRECTORY_LABEL, PID_LABEL, LocalProvider
from drydock.sandbox.providers.local_processes import is_running
from drydock.sandbox.records import SandboxStore
from tests.infra.test_embedded import alive, server_pids, wait_gone


class TestDev:
    @pytest.mark.timeout(240)
    async def test_starts_everything_and_stops_cleanly_on_sigint(
        self, tmp_path: Path, redis: Redis, keys: Keys, server_keys: ServerKeys
    ) -> None:
        port = free_port()
        environment = {k: v for k, v in os.environ.items() if not k.startswith("DRYDOCK_")}
        environment["DRYDOCK_HTTP_PORT"] = str(port)
        environment["DRYDOCK_HTTP_METRICS_PORT"] = str(free_port())
        root = tmp_path / "sandboxes"
        environment["DRYDOCK_SANDBOX_LOCAL_ROOT"] = str(root)
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
            assert f"web: http://127.0.0.1:{port} (NATS user web)" in text
            assert "(NATS user coder-worker)" in text
            assert (dev_data_dir(tmp_path) / "jetstream").is_dir()
            key_file = dev_data_dir(tmp_path) / "crypto-key"
            assert f"DRYDOCK_CRYPTO_KEYS is unset: using the development key generated in {key_file}" in text
            assert (tmp_path / ".drydock" / "dev" / "crypto-key").stat().st_mode & 0o777 == 0o600
            pids = [
                pid for cmd, pid in server_pids().items() if f"-p {nats_port[1]}" in cmd or f":{redis_port[1]}" in cmd
            ]
            assert len(pids) == 2
            # "ready" comes once the web server answers: the first request, bounded in time, succeeds.
            async with httpx.AsyncClient(timeout=30) as client:
                try:
                    response = await client.get(f"http://127.0.0.1:{port}/readyz")
                except httpx.HTTPError as error:
                    pytest.fail(f"drydock dev said ready but /readyz failed: {error!r}\n{text}")
            assert response.json()["status"] == "ready"
            assert "drydock dev: not configured yet" in text
            assert "DRYDOCK_CRYPTO_KEYS" in text
            assert "credential proxy cannot inject credentials" not in text
            assert "no model endpoint is configured" not in text
            assert "\x1b[" not in text, "ANSI colours in piped output"

            # A sandbox in dev's root whose record dev's store does not have, as after a restart
            # of its ephemeral store.
            provider = LocalProvider(
                SandboxSettings(local_root=str(root), local_bubblewrap=False, local_allow_unisolated=True),
                SandboxStore(redis, keys, server_keys),
            )
            sandbox = await provider.create(str(uuid.uuid4()))
            await provider.aclose()

            process.send_signal(signal.SIGINT)
            rest = await asyncio.wait_for(process.stdout.read(), 30)
            assert await asyncio.wait_for(process.wait(), 30) == 0
            assert "drydock: stopped" in rest.decode()
            assert "stopped 1 sandbox(es)" in rest.decode()
            assert not is_running(int(sandbox.labels[PID_LABEL]), sandbox.labels[DIRECTORY_LABEL])
            assert not (root / sandbox.id).exists()
            await SandboxStore(redis, keys, server_keys).remove(sandbox.id)
            assert await wait_gone(pids, within=5) == []
            assert not any(alive(pid) for pid in pids)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


class TestDevDataDir:
    def test_is_kept_unless_fresh(self, tmp_path: Path) -> None:
        directory = prepare_dev_data_dir(fresh=False, root=tmp_path)
        (directory / "appendonlydir").mkdir()
        assert prepare_dev_data_dir(fresh=False, root=tmp_path) == directory
        assert (directory / "appendonlydir").is_dir()
        assert prepare_dev_data_dir(fresh=True, root=tmp_path) == directory
        assert list(directory.iterdir()) == []

    def test_is_git_ignored(self) -> None:
        ignored = (Path(__file__).parent.parent / ".gitignore").read_text().splitlines()
        assert "/.drydock/" in ignored
