"""``python -m tools.gate`` (``pdm run check``): every check CI runs, the slow ones side by side.

Stages run in order and the gate stops after the first one that fails. A stage's first step
runs with its output shown as it comes; the others run beside it, their output kept and shown
when the stage ends. The unit tests wait on servers, sandboxes and subprocesses about half their
time, which the type check, the chart's checks and the installation of the 3.12 environment fill.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import IO


@dataclass(frozen=True)
class Step:
    name: str
    command: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    step: Step
    code: int
    seconds: float

    @property
    def passed(self) -> bool:
        return self.code == 0


def pdm(script: str, *arguments: str) -> tuple[str, ...]:
    return ("pdm", "run", script, *arguments)


STAGES: tuple[tuple[Step, ...], ...] = (
    (Step("lint", pdm("lint")),),
    (
        Step("unit tests on 3.11", pdm("test", "-n", "4")),
        Step("typecheck", pdm("typecheck")),
        Step("chart", pdm("chart")),
        Step("the 3.12 environment", (sys.executable, "-m", "tools.other_python", "3.12")),
    ),
    (Step("unit tests on 3.12", pdm("test-py312", "-n", "4")),),
    (Step("integration", pdm("integration")),),
)
"""The unit legs run in four pytest-xdist processes whatever the cores: two per core of a
2-core machine finish the 3.11 leg in 5 minutes instead of 7."""


async def _run(step: Step, output: IO[bytes] | None) -> Outcome:
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(*step.command, stdout=output, stderr=output)
    try:
        code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return Outcome(step, code, time.monotonic() - started)


async def _stage(stage: tuple[Step, ...], out: IO[str]) -> list[Outcome]:
    first, *beside = stage
    for step in beside:
        print(f"==> {step.name} (beside {first.name}, shown when it ends): {' '.join(step.command)}", file=out)
    print(f"==> {first.name}: {' '.join(first.command)}", file=out, flush=True)
    with contextlib.ExitStack() as files:
        logs = [files.enter_context(tempfile.TemporaryFile()) for _ in beside]
        side = [asyncio.create_task(_run(step, log)) for step, log in zip(beside, logs, strict=True)]
        try:
            outcomes = [await _run(first, None), *await asyncio.gather(*side)]
        finally:
            for task in side:
                task.cancel()
            await asyncio.gather(*side, return_exceptions=True)
        for outcome, log in zip(outcomes[1:], logs, strict=True):
            log.seek(0)
            print(f"==> {outcome.step.name} ({_verdict(outcome)}):", file=out)
            out.write(log.read().decode(errors="replace"))
            out.flush()
    return outcomes


def _verdict(outcome: Outcome) -> str:
    minutes, seconds = divmod(round(outcome.seconds), 60)
    state = "passed" if outcome.passed else f"FAILED with exit code {outcome.code}"
    return f"{state} in {minutes}:{seconds:02d}"


async def run(stages: tuple[tuple[Step, ...], ...], out: IO[str] = sys.stdout) -> int:
    """Run ``stages``; the exit code of the first step that failed, or 0."""
    done: list[Outcome] = []
    for stage in stages:
        done += await _stage(stage, out)
        if not all(outcome.passed for outcome in done):
            break
    print("\ngate:", file=out)
    for outcome in done:
        print(f"  {outcome.step.name}: {_verdict(outcome)}", file=out)
    failed = [outcome for outcome in done if not outcome.passed]
    ran = {outcome.step for outcome in done}
    skipped = [step.name for stage in stages for step in stage if step not in ran]
    if skipped:
        print(f"  not run, after a failure: {', '.join(skipped)}", file=out)
    out.flush()
    if not failed:
        return 0
    return failed[0].code if failed[0].code > 0 else 1


async def main(stages: tuple[tuple[Step, ...], ...] = STAGES) -> int:
    """The gate; SIGINT or SIGTERM stops it and every step running."""
    gate = asyncio.current_task()
    assert gate is not None
    for stop in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(stop, gate.cancel)
    try:
        return await run(stages)
    except asyncio.CancelledError:
        print("gate: stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
