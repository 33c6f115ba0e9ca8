"""``pdm run check`` (:mod:`tools.gate`): the stages in order, the steps beside the first shown
when it ends, and the first failure stops the gate with its exit code."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import sys
import tomllib
from pathlib import Path

from tests.waiting import eventually
from tools import gate
from tools.gate import Step

ROOT = Path(__file__).resolve().parents[2]


def python(name: str, code: str) -> Step:
    return Step(name, (sys.executable, "-c", code))


def printing(name: str, text: str, *, exit_code: int = 0, after: float = 0.0) -> Step:
    return python(name, f"import sys, time; time.sleep({after}); print({text!r}, flush=True); sys.exit({exit_code})")


async def test_steps_beside_the_first_run_while_it_runs(tmp_path: Path) -> None:
    started = tmp_path / "beside-started"
    beside = python("beside", f"open({str(started)!r}, 'w').close(); print('beside done')")
    waits = python(
        "first",
        "import pathlib, sys, time\n"
        "deadline = time.monotonic() + 30\n"
        f"while not pathlib.Path({str(started)!r}).exists():\n"
        "    if time.monotonic() > deadline: sys.exit(7)\n"
        "    time.sleep(0.01)\n",
    )
    out = io.StringIO()
    assert await gate.run(((waits, beside),), out) == 0
    assert "beside (passed in" in out.getvalue()
    assert "beside done" in out.getvalue()


async def test_a_steps_output_is_shown_under_its_own_name_after_the_first() -> None:
    out = io.StringIO()
    code = await gate.run(((printing("first", "one", after=0.2), printing("second", "two")),), out)
    assert code == 0
    text = out.getvalue()
    assert text.index("==> second (passed in") < text.index("\ntwo\n")
    assert "  first: passed in 0:00" in text
    assert "  second: passed in 0:00" in text


async def test_the_first_failing_stage_stops_the_gate_with_its_code() -> None:
    out = io.StringIO()
    stages = (
        (printing("lint", "clean"),),
        (printing("tests", "ran"), printing("types", "wrong", exit_code=3)),
        (printing("later", "never"),),
    )
    assert await gate.run(stages, out) == 3
    text = out.getvalue()
    assert "types: FAILED with exit code 3" in text
    assert "never" not in text
    assert "not run, after a failure: later" in text


async def test_a_step_killed_by_a_signal_fails_the_gate() -> None:
    killed = python("killed", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert await gate.run(((killed,),), io.StringIO()) == 1


async def test_stopping_the_gate_stops_its_steps(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    sleeper = f"import os, time; open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n'); time.sleep(300)"
    stages = (
        (python("first", sleeper), python("beside", sleeper)),
        (python("never", "print('never')"),),
    )
    script = f"import asyncio, sys; from tools import gate; sys.exit(asyncio.run(gate.main({stages!r})))"
    runner = await asyncio.create_subprocess_exec(
        sys.executable, "-c", f"from tools.gate import Step\n{script}", cwd=ROOT, stdout=asyncio.subprocess.PIPE
    )

    def both_started() -> list[int] | None:
        written = pids.read_text().split() if pids.exists() else []
        return [int(pid) for pid in written] if len(written) == 2 else None

    def stopped() -> bool:
        for pid in started:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            return False
        return True

    started = await eventually(both_started, what="both steps started")
    runner.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(runner.wait(), 30) == 130
    await eventually(stopped, what="both steps stopped")
    assert runner.stdout is not None
    assert b"never" not in await runner.stdout.read()


def test_every_step_of_the_gate_is_a_pdm_script_or_a_project_tool() -> None:
    with (ROOT / "pyproject.toml").open("rb") as file:
        scripts = tomllib.load(file)["tool"]["pdm"]["scripts"]
    assert scripts["check"]["cmd"] == "python -m tools.gate"
    for stage in gate.STAGES:
        for step in stage:
            if step.command[:2] == ("pdm", "run"):
                assert step.command[2] in scripts, step
            else:
                assert step.command[:3] == (sys.executable, "-m", "tools.other_python"), step
