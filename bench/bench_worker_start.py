"""How long a coder-worker process takes from its start until it takes its first wake.

Starts an embedded NATS and Valkey, provisions the streams, then ``RUNS`` times: publishes a
wake, spawns ``drydock serve coder-worker`` and measures from the spawn until the run consumer
has delivered that wake to it. Prints each run and the median.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
import uuid

from drydock.bus import Bus, Wake, connect_nats, provision, topology
from drydock.bus.streams import RUNS_STREAM, run_consumer
from drydock.config import load_settings
from drydock.embedded import embedded_infrastructure, free_port
from drydock.roles import Role

RUNS = 5
DEADLINE = 60.0


async def _taken_after(bus: Bus, env: dict[str, str]) -> float:
    published = await bus.wake(Wake(thread_id=str(uuid.uuid4()), role=Role.CODER))
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "drydock", "serve", "coder-worker",
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while time.perf_counter() - started < DEADLINE:
            if process.returncode is not None:
                raise RuntimeError(f"the worker exited with {process.returncode} before taking a wake")
            info = await bus.js.consumer_info(RUNS_STREAM, run_consumer(Role.CODER))
            if info.delivered is not None and (info.delivered.stream_seq or 0) >= published.seq:
                return time.perf_counter() - started
            await asyncio.sleep(0.05)
        raise RuntimeError(f"the worker took no wake within {DEADLINE:g} s")
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()


async def main() -> None:
    async with embedded_infrastructure() as urls:
        assert urls.nats is not None
        assert urls.redis is not None
        settings = load_settings(nats={"url": urls.nats}, redis={"url": urls.redis})
        nc = await connect_nats(settings.nats, name="bench-worker-start")
        bus = Bus(nc)
        await provision(bus.js, topology(settings.nats))
        figures = []
        try:
            for run in range(RUNS):
                env = {
                    **os.environ,
                    "DRYDOCK_NATS_URL": urls.nats,
                    "DRYDOCK_REDIS_URL": urls.redis,
                    "DRYDOCK_HTTP_PORT": str(free_port()),
                }
                figures.append(await _taken_after(bus, env))
                print(f"run {run}: first wake taken after {figures[-1]:.2f} s", flush=True)
        finally:
            await nc.close()
        print(f"coder-worker takes its first wake: median {statistics.median(figures):.2f} s, max {max(figures):.2f} s")
