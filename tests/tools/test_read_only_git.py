"""The reviewer's read-only ``git`` tool: the arguments it refuses, and real git in a real
local sandbox for the ones it runs."""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator

import pytest
from langchain_core.tools import BaseTool

from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.providers.local import LocalProvider
from drydock.tools.read_only_git import GitArgumentError, build, git_command
from tests.sandbox.conftest import bwrap, local_provider, records, sandbox_root, sandbox_settings

__all__ = ["bwrap", "local_provider", "records", "sandbox_root", "sandbox_settings"]


class TestArguments:
    def test_a_diff_runs_without_external_programs(self) -> None:
        assert git_command("/w/r", "diff", ["--stat", "origin/main...HEAD", "--", "src/app.py"]) == [
            "git", "--no-pager", "-C", "/w/r", "diff", "--no-ext-diff", "--no-textconv", "--no-color",
            "--stat", "origin/main...HEAD", "--", "src/app.py",
        ]  # fmt: skip

    def test_numeric_options_are_taken(self) -> None:
        assert git_command("/w/r", "blame", ["-L3,9", "HEAD", "--", "a.py"])[-4:] == ["-L3,9", "HEAD", "--", "a.py"]
        assert git_command("/w/r", "log", ["-n5", "--oneline"])[-2:] == ["-n5", "--oneline"]

    @pytest.mark.parametrize(
        ("command", "args", "message"),
        [
            ("push", ["origin", "HEAD"], "'push' is not available"),
            ("commit", ["-m", "x"], "'commit' is not available"),
            ("diff", ["--output=/tmp/x"], "option '--output=/tmp/x' is not allowed"),
            ("log", ["-c", "core.pager=sh"], "option '-c' is not allowed"),
            ("show", ["--ext-diff"], "option '--ext-diff' is not allowed"),
            ("diff", ["HEAD;touch x"], "is not a revision or path"),
            ("diff", ["$(id)"], "is not a revision or path"),
            ("blame", ["--", "-rf"], "is not a revision or path"),
            ("log", ["HEAD"] * 30, "at most 24 arguments"),
        ],
    )
    def test_what_it_refuses(self, command: str, args: list[str], message: str) -> None:
        with pytest.raises(GitArgumentError, match=message.replace("(", r"\(").replace(")", r"\)")):
            git_command("/w/r", command, args)


@pytest.fixture
async def repository(local_provider: LocalProvider, thread_id: str) -> AsyncIterator[tuple[SandboxBackend, str]]:
    sandbox = SandboxBackend(await local_provider.create(thread_id))
    path = f"{sandbox.handle.workspace}/widgets"
    commit = "git -c user.name=Ann -c user.email=ann@example.com commit -q"
    script = (
        f"mkdir -p {path} && cd {path} && git init -q -b main"
        " && printf 'def add(a, b):\\n    return a - b\\n' > calc.py && git add calc.py"
        f" && {commit} -m 'Add add()' && sed -i 's/a - b/a + b/' calc.py"
        f" && {commit} -am 'Fix add()'"
    )
    result = await sandbox.aexecute(script)
    assert result.exit_code == 0, result.output
    yield sandbox, path
    await sandbox.aclose()


async def _run(tool: BaseTool, command: str, *args: str) -> str:
    return str(await tool.ainvoke({"command": command, "args": list(args)}))


class TestInTheSandbox:
    async def test_it_reads_the_history(self, repository: tuple[SandboxBackend, str]) -> None:
        sandbox, path = repository
        tool = build(sandbox, path)
        diff = await _run(tool, "diff", "HEAD~1...HEAD")
        assert "-    return a - b" in diff
        assert "+    return a + b" in diff
        assert "Fix add()" in await _run(tool, "log", "--oneline", "-n1")
        assert "Ann" in await _run(tool, "blame", "-L2,2", "HEAD", "--", "calc.py")

    async def test_a_refused_argument_runs_nothing(self, repository: tuple[SandboxBackend, str]) -> None:
        sandbox, path = repository
        tool = build(sandbox, path)
        answer = await _run(tool, "diff", f"--output={path}/written")
        assert answer.startswith("Error: option")
        listing = await sandbox.aexecute(f"ls {shlex.quote(path)}")
        assert "written" not in listing.output

    async def test_a_git_error_is_reported_with_its_exit_code(self, repository: tuple[SandboxBackend, str]) -> None:
        sandbox, path = repository
        answer = await _run(build(sandbox, path), "show", "no-such-revision")
        assert answer.startswith("git show failed (exit 128)")
