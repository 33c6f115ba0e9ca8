"""One command run by the daemon's executor, in this process with a real shell: exit codes and
output, the cap, the time limit, the drain after exit, and cancellation, with the exit watched
through a pidfd and, where there is none, by a thread."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from drydock.sandbox.daemon.execution import ExecResult, ProcessGroups, run_command
from drydock.sandbox.daemon.protocol import TIMEOUT_EXIT_CODE
from tests.waiting import eventually

SHELL = shutil.which("bash") or "/bin/sh"


@pytest.fixture(params=["pidfd", "thread"])
def exit_watch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with the exit watched through a pidfd and again as where there is none."""
    if request.param == "pidfd" and not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfd on this platform")
    if request.param == "thread":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    return str(request.param)


async def run(
    command: str,
    workspace: Path,
    *,
    time_limit: float = 30.0,
    output_cap: int = 1024,
    groups: ProcessGroups | None = None,
    drain_grace: float = 0.25,
) -> ExecResult:
    return await run_command(
        command,
        shell=SHELL,
        cwd=workspace,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GREETING": "hello"},
        time_limit=time_limit,
        output_cap=output_cap,
        groups=groups or ProcessGroups(),
        drain_grace=drain_grace,
    )


def _alive(pid: int) -> bool:
    """Whether ``pid`` is running (a zombie is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _reaped(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def _text(path: Path) -> str:
    return path.read_text().strip() if path.exists() else ""


async def _number_in(path: Path) -> int:
    return int(await eventually(lambda: _text(path), what=f"a pid in {path.name}"))


@pytest.mark.usefixtures("exit_watch")
class TestExit:
    async def test_exit_code_and_combined_output_in_the_working_directory(self, tmp_path: Path) -> None:
        result = await run('echo "$GREETING from $(pwd)"; echo oops >&2; exit 3', tmp_path)
        assert (result.exit_code, result.output) == (3, f"hello from {tmp_path}\noops\n")
        assert not result.truncated
        assert not result.timed_out

    async def test_a_shell_killed_by_a_signal_reports_128_plus_its_number(self, tmp_path: Path) -> None:
        assert (await run("kill -KILL $$", tmp_path)).exit_code == 128 + 9

    async def test_the_shell_is_reaped_by_the_time_the_result_is_back(self, tmp_path: Path) -> None:
        result = await run("echo $$", tmp_path)
        assert _reaped(int(result.output))


@pytest.mark.usefixtures("exit_watch")
class TestOutputCap:
    async def test_output_beyond_the_cap_is_read_to_its_end_and_cut(self, tmp_path: Path) -> None:
        result = await run("head -c 1000000 /dev/zero | tr '\\0' x; echo done >&2", tmp_path, output_cap=10)
        assert (result.exit_code, result.output, result.truncated) == (0, "x" * 10, True)


@pytest.mark.usefixtures("exit_watch")
class TestTimeLimit:
    async def test_the_whole_group_is_killed_at_the_limit(self, tmp_path: Path) -> None:
        result = await run("sleep 60 & echo $!; wait", tmp_path, time_limit=0.5)
        assert (result.exit_code, result.timed_out) == (TIMEOUT_EXIT_CODE, True)
        await eventually(lambda: not _alive(int(result.output)), what="the background sleep killed")


@pytest.mark.usefixtures("exit_watch")
class TestDrain:
    async def test_output_written_after_the_shell_exits_is_collected(self, tmp_path: Path) -> None:
        result = await run("(sleep 0.05; echo late) & echo early", tmp_path, drain_grace=30.0)
        assert result.output == "early\nlate\n"

    async def test_a_background_process_holding_the_pipe_keeps_running_and_is_not_waited_for(
        self, tmp_path: Path
    ) -> None:
        result = await run("sleep 60 & echo $!", tmp_path, drain_grace=0.1)
        background = int(result.output)
        try:
            assert result.exit_code == 0
            assert _alive(background)
        finally:
            os.kill(background, 9)


@pytest.mark.usefixtures("exit_watch")
class TestCancellation:
    async def test_a_cancelled_command_is_killed_with_its_group_and_reaped(self, tmp_path: Path) -> None:
        groups = ProcessGroups()
        command = f"echo $$ > {tmp_path}/shell; sleep 60 & echo $! > {tmp_path}/background; wait"
        running = asyncio.create_task(run(command, tmp_path, groups=groups))
        shell, background = await _number_in(tmp_path / "shell"), await _number_in(tmp_path / "background")
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await eventually(lambda: not _alive(background), what="the background sleep killed")
        await eventually(lambda: _reaped(shell), what="the shell reaped")
