"""``DRYDOCK_HTTP_WORKERS``: ``drydock serve`` runs the ingress (or the dashboard, or web) in that
many processes sharing its port, with one ``/metrics`` adding up all of their counters."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from drydock import services
from drydock.embedded import EmbeddedUrls, free_port

WORKERS = 2
DELIVERIES = 40


@dataclass
class Served:
    url: str
    metrics_url: str
    process: asyncio.subprocess.Process


def children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"


@pytest.fixture
async def served(infra: EmbeddedUrls) -> AsyncIterator[Served]:
    assert infra.nats is not None
    assert infra.redis is not None
    port, metrics_port = free_port(), free_port()
    env = {name: value for name, value in os.environ.items() if not name.startswith("DRYDOCK_")} | {
        "DRYDOCK_NATS_URL": infra.nats,
        "DRYDOCK_REDIS_URL": infra.redis,
        "DRYDOCK_HTTP_PORT": str(port),
        "DRYDOCK_HTTP_METRICS_PORT": str(metrics_port),
        "DRYDOCK_HTTP_WORKERS": str(WORKERS),
        "DRYDOCK_GITHUB_WEBHOOK_SECRET": "workers-secret",
    }
    process = await asyncio.create_subprocess_exec(
        Path(sys.executable).parent / "drydock", "serve", "ingress", env=env, stdout=asyncio.subprocess.DEVNULL
    )
    try:
        yield Served(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{metrics_port}/metrics", process)
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()


async def ready(url: str, *, within: float) -> None:
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(trust_env=False) as client:
        while True:
            try:
                if (await client.get(url)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{url} did not answer within {within:g} s")
            await asyncio.sleep(0.1)


class TestWorkers:
    def test_the_web_services_may_run_in_several_processes(self) -> None:
        chosen = {name for name, service in services.available().items() if service.http_workers}
        assert chosen == {"ingress", "dashboard", "web"}

    async def test_the_processes_share_the_port_and_one_metrics_endpoint(self, served: Served) -> None:
        # A cold interpreter importing the whole library takes seconds on a busy machine.
        await ready(served.url + "/readyz", within=120)
        await ready(served.metrics_url, within=30)
        workers = children(served.process.pid)
        assert len(workers) == WORKERS
        # A connection of its own per delivery, so that the kernel spreads them over the workers.
        for _ in range(DELIVERIES):
            async with httpx.AsyncClient(base_url=served.url, trust_env=False) as client:
                refused = await client.post("/webhooks/github", content=b"{}", headers={"X-GitHub-Event": "ping"})
            assert refused.status_code == 401
        async with httpx.AsyncClient(trust_env=False) as client:
            metrics = (await client.get(served.metrics_url)).text
        counted = [
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("drydock_ingress_deliveries_total{") and 'outcome="rejected_signature"' in line
        ]
        assert sum(counted) == DELIVERIES

        served.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            await served.process.wait()
        assert not [pid for pid in workers if alive(pid)]
