"""``python -m bench [NAME ...]``: run the named benchmarks (all ``bench/bench_*.py`` by default)."""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path

from drydock.cli import event_loop_factory


def main(names: list[str]) -> None:
    available = sorted(path.stem.removeprefix("bench_") for path in Path(__file__).parent.glob("bench_*.py"))
    chosen = names or available
    unknown = sorted(set(chosen) - set(available))
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(available)}")
    for name in chosen:
        print(f"== {name}", flush=True)
        module = importlib.import_module(f"bench.bench_{name}")
        # On the services' own event loop, so the figures are those of a deployment.
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            runner.run(module.main())


if __name__ == "__main__":
    main(sys.argv[1:])
