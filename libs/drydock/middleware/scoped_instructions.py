"""Middleware 4: append the instruction files (``AGENTS.md``) of a file's ancestor directories
to the result of reading it, once per run.

The repository's root ``AGENTS.md`` is in the system prompt; the ones in subdirectories apply
only to files below them, so the agent learns them when it first reads such a file. Files are
appended outermost first (the nearest directory's last, so the most specific instructions come
last). Each directory is looked at once per conversation of the run (the agent's, and each
``task`` call's subagent, which starts a conversation of its own), found or not; parallel reads
in one step do not append the same file twice.
"""

from __future__ import annotations

import posixpath
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import structlog
from deepagents.backends.protocol import BackendProtocol
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from drydock.middleware.protocols import InstructionFileReader
from drydock.sandbox.backend import SandboxBackend

log = structlog.get_logger(__name__)

INSTRUCTION_FILE = "AGENTS.md"
MAX_INSTRUCTION_CHARS = 20_000
MAX_INSTRUCTION_BYTES = 64 * 1024
"""An instruction file larger than this is not read at all (the sandbox's files are its code's)."""


def capped(text: str) -> str:
    """``text`` cut to :data:`MAX_INSTRUCTION_CHARS`, marked where it was cut."""
    if len(text) > MAX_INSTRUCTION_CHARS:
        return text[:MAX_INSTRUCTION_CHARS] + "\n[… truncated]"
    return text


def instruction_text(content: bytes | None) -> str | None:
    """A downloaded instruction file's text, cut as :func:`capped` cuts it; ``None`` without one."""
    return capped(content.decode(errors="replace")) if content is not None else None


class BackendInstructionFiles:
    """Reads instruction files through a deepagents backend (the thread's sandbox); from a
    sandbox, none larger than :data:`MAX_INSTRUCTION_BYTES`."""

    def __init__(self, backend: BackendProtocol) -> None:
        self._backend = backend

    async def read_texts(self, paths: Sequence[str]) -> dict[str, str]:
        if isinstance(self._backend, SandboxBackend):
            responses = await self._backend.adownload_files(list(paths), max_file_bytes=MAX_INSTRUCTION_BYTES)
        else:
            responses = await self._backend.adownload_files(list(paths))
        return {
            response.path: response.content.decode("utf-8", errors="replace")
            for response in responses
            if response.error is None and response.content is not None
        }


def ancestor_instruction_files(file_path: str, root: str, *, filename: str = INSTRUCTION_FILE) -> list[str]:
    """The instruction files that apply to ``file_path`` below ``root`` (the root's own
    excluded), outermost first; empty when the path is not under ``root``."""
    root = posixpath.normpath(root)
    path = posixpath.normpath(file_path)
    if not posixpath.isabs(path) or posixpath.commonpath([root, path]) != root or path == root:
        return []
    found = []
    directory = posixpath.dirname(path)
    while directory != root and directory.startswith(root):
        candidate = posixpath.join(directory, filename)
        if candidate != path:
            found.append(candidate)
        directory = posixpath.dirname(directory)
    return list(reversed(found))


def _appendix(path: str, text: str) -> str:
    text = capped(text)
    scope = posixpath.dirname(path)
    return f"\n\n<instructions file={path!r} applies-to={scope + '/'!r}>\n{text.strip()}\n</instructions>"


class ScopedInstructions(AgentMiddleware[AgentState[Any], Any, Any]):
    """Appends ancestor ``AGENTS.md`` files under ``root`` to ``read_file`` results.

    ``reader`` is None when the run has no sandbox to read from: the middleware does nothing.
    """

    def __init__(
        self,
        reader: InstructionFileReader | None,
        root: str,
        *,
        read_tools: frozenset[str] = frozenset({"read_file"}),
        path_argument: str = "file_path",
    ) -> None:
        super().__init__()
        self.reader = reader
        self.root = root
        self.read_tools = read_tools
        self.path_argument = path_argument
        self._seen: dict[str | None, set[str]] = {}

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        result = await handler(request)
        call = request.tool_call
        path = call["args"].get(self.path_argument)
        if (
            self.reader is None
            or call["name"] not in self.read_tools
            or not isinstance(path, str)
            or not isinstance(result, ToolMessage)
            or result.status == "error"
            or not isinstance(result.content, str)
        ):
            return result
        seen = self._seen.setdefault(_conversation(request), set())
        candidates = [p for p in ancestor_instruction_files(path, self.root) if p not in seen]
        if not candidates:
            return result
        seen.update(candidates)
        try:
            texts = await self.reader.read_texts(candidates)
        except Exception as error:
            seen.difference_update(candidates)
            log.warning("could not read instruction files", paths=candidates, error=repr(error))
            return result
        appendix = "".join(_appendix(p, texts[p]) for p in candidates if texts.get(p, "").strip())
        if not appendix:
            return result
        return result.model_copy(update={"content": result.content + appendix})


def _conversation(request: ToolCallRequest) -> str | None:
    """The conversation a tool call belongs to, by its first message. One instance serves one
    run: the agent's conversation, and each of the subagent's calls, which start conversations of
    their own. Told apart this way rather than reset by a ``before_agent`` hook, which would be a
    graph node, with its checkpoint, at the start of every run."""
    messages = request.state.get("messages") if isinstance(request.state, dict) else None
    return messages[0].id if messages else None
