"""``git``: the reviewer's read-only view of the history in its sandbox (diff, log, show, blame).

It runs one of a fixed set of read-only subcommands in the pull request's checkout, as an
argument vector built here and quoted word by word, never a shell line from the model. Every
option must be on the subcommand's allow-list (none of them writes a file, runs a program or
reads configuration from the model), revisions and paths are checked against a narrow
character set and may not start with ``-``, and external diff drivers and text conversion are
always off. Built by the reviewer's graph factory, which binds it to the sandbox and the
checkout's path.
"""

from __future__ import annotations

import re
import shlex
from typing import Literal

from deepagents.backends.protocol import SandboxBackendProtocol
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

NAME = "git"

DESCRIPTION = (
    "Read the repository's history in your checkout with git, read-only: `diff`, `log`, `show` or "
    "`blame`, with arguments as a list (revisions, paths after `--`, and a few options). For example "
    '{"command": "diff", "args": ["--stat", "origin/main...HEAD"]} or '
    '{"command": "blame", "args": ["-L10,20", "HEAD", "--", "calc.py"]}.'
)

Subcommand = Literal["diff", "log", "show", "blame"]

_COMMON = frozenset({"--stat", "--name-only", "--name-status", "-w", "--ignore-all-space", "--word-diff"})
FLAGS: dict[str, frozenset[str]] = {
    "diff": _COMMON,
    "log": _COMMON | {"--oneline", "-p", "--patch", "--follow", "--first-parent", "--no-merges"},
    "show": _COMMON | {"--oneline"},
    "blame": frozenset({"-w", "-s", "-e", "--porcelain"}),
}
"""The options each subcommand takes, besides the numeric ones in :data:`NUMERIC`."""

NUMERIC: dict[str, re.Pattern[str]] = {
    "diff": re.compile(r"^(-U\d{1,4}|--unified=\d{1,4})$"),
    "log": re.compile(r"^(-n\d{1,5}|--max-count=\d{1,5}|-U\d{1,4}|--unified=\d{1,4})$"),
    "show": re.compile(r"^(-U\d{1,4}|--unified=\d{1,4})$"),
    "blame": re.compile(r"^-L\d{1,7},\d{1,7}$"),
}

SAFETY: dict[str, tuple[str, ...]] = {
    "diff": ("--no-ext-diff", "--no-textconv", "--no-color"),
    "log": ("--no-ext-diff", "--no-textconv", "--no-color"),
    "show": ("--no-ext-diff", "--no-textconv", "--no-color"),
    "blame": ("--no-textconv",),
}
"""Options always given: no external diff programs, no text-conversion filters."""

OPERAND = re.compile(r"^[A-Za-z0-9_./@^~:+,=%-]{1,400}$")
MAX_ARGUMENTS = 24
MAX_OUTPUT = 60_000


class GitArgumentError(ValueError):
    """An argument the read-only git tool does not run."""


def git_command(repository: str, command: str, args: list[str]) -> list[str]:
    """The argument vector for ``git <command> <args>`` in ``repository``; raises
    :class:`GitArgumentError` for a subcommand, option or operand it does not allow."""
    if command not in FLAGS:
        raise GitArgumentError(f"git {command!r} is not available: use one of {', '.join(FLAGS)}")
    if len(args) > MAX_ARGUMENTS:
        raise GitArgumentError(f"at most {MAX_ARGUMENTS} arguments")
    checked: list[str] = []
    paths = False
    for arg in args:
        if arg == "--" and not paths:
            paths = True
        elif arg.startswith("-") and not paths:
            if arg not in FLAGS[command] and not NUMERIC[command].match(arg):
                allowed = ", ".join(sorted(FLAGS[command]))
                raise GitArgumentError(f"option {arg!r} is not allowed for git {command} (allowed: {allowed})")
        elif arg.startswith("-") or not OPERAND.match(arg):
            raise GitArgumentError(f"{arg!r} is not a revision or path this tool takes")
        checked.append(arg)
    return ["git", "--no-pager", "-C", repository, command, *SAFETY[command], *checked]


class GitInput(BaseModel):
    command: Subcommand = Field(description="The read-only git subcommand.")
    args: list[str] = Field(default_factory=list, description="Its arguments: options, revisions, `--`, paths.")


def build(backend: SandboxBackendProtocol, repository: str) -> BaseTool:
    """The tool, running git in ``repository`` (a path in the sandbox) through ``backend``."""

    async def git(command: Subcommand, args: list[str] | None = None) -> str:
        try:
            argv = git_command(repository, command, list(args or []))
        except GitArgumentError as error:
            return f"Error: {error}"
        result = await backend.aexecute(shlex.join(argv))
        output = result.output
        if len(output) > MAX_OUTPUT:
            output = output[:MAX_OUTPUT] + f"\n… cut at {MAX_OUTPUT} characters: narrow it with paths or --stat."
        if result.exit_code:
            return f"git {command} failed (exit {result.exit_code}):\n{output}"
        return output

    return StructuredTool.from_function(coroutine=git, name=NAME, description=DESCRIPTION, args_schema=GitInput)
