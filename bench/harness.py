"""A small benchmark harness: time an async operation, print percentiles and throughput.

Each benchmark module has an async ``main()`` that prints its figures with :func:`report`;
``python -m bench`` runs every module, ``python -m bench NAME`` one of them.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Figures:
    name: str
    count: int
    seconds: float
    latencies_ms: list[float]

    @property
    def throughput(self) -> float:
        return self.count / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return 0.0
        index = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))
        return ordered[index]

    def line(self) -> str:
        return (
            f"{self.name:<44} n={self.count:<6} p50={self.percentile(50):8.3f} ms  "
            f"p99={self.percentile(99):8.3f} ms  mean={statistics.fmean(self.latencies_ms):8.3f} ms  "
            f"{self.throughput:10.1f} ops/s"
        )


async def measure(name: str, operation: Callable[[], Awaitable[object]], *, count: int, warmup: int = 20) -> Figures:
    """Run ``operation`` ``count`` times one after another, timing each call."""
    for _ in range(warmup):
        await operation()
    latencies = []
    started = time.perf_counter()
    for _ in range(count):
        begin = time.perf_counter()
        await operation()
        latencies.append((time.perf_counter() - begin) * 1000)
    return Figures(name, count, time.perf_counter() - started, latencies)


def report(figures: Figures, *, target_p50_ms: float | None = None) -> Figures:
    verdict = ""
    if target_p50_ms is not None:
        verdict = f"  target p50 < {target_p50_ms} ms: {'met' if figures.percentile(50) < target_p50_ms else 'MISSED'}"
    print(figures.line() + verdict, flush=True)
    return figures


def rss_kib(pid: int | str = "self") -> int:
    """The resident set size of process ``pid`` (this one by default), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """User plus system CPU time of process ``pid`` so far; with ``children``, plus that of its
    running children (the HTTP worker processes of ``DRYDOCK_HTTP_WORKERS``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / _TICKS
    if not children:
        return own
    running = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return own + sum(cpu_seconds(int(child), children=True) for child in running)


_TICKS = os.sysconf("SC_CLK_TCK")
