from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph_checkpoint_plainredis import AsyncRedisSaver

from drydock.middleware.scoped_instructions import (
    MAX_INSTRUCTION_CHARS,
    BackendInstructionFiles,
    ScopedInstructions,
    ancestor_instruction_files,
    capped,
)
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.providers.local import LocalProvider
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import chat_model, run_config
from tests.sandbox.conftest import (  # noqa: F401 (fixtures)
    bwrap,
    local_provider,
    records,
    sandbox_root,
    sandbox_settings,
)


@pytest.fixture
def backend(tmp_path: Path) -> FilesystemBackend:
    files = {
        "repo/AGENTS.md": "Root rules (already in the system prompt).",
        "repo/pkg/AGENTS.md": "Package rule: use tabs.",
        "repo/pkg/sub/AGENTS.md": "Subpackage rule: no globals.",
        "repo/pkg/sub/a.py": "print('a')\n",
        "repo/pkg/sub/b.py": "print('b')\n",
        "repo/docs/guide.md": "# Guide\n",
        "elsewhere/AGENTS.md": "Not ours.",
        "elsewhere/x.py": "x = 1\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return FilesystemBackend(root_dir=tmp_path, virtual_mode=True)


def _reads(messages: Sequence[object]) -> list[str]:
    return [m.text for m in messages if isinstance(m, ToolMessage) and m.name == "read_file"]


class TestAncestorInstructionFiles:
    def test_outermost_first_without_the_root(self) -> None:
        assert ancestor_instruction_files("/repo/pkg/sub/a.py", "/repo") == [
            "/repo/pkg/AGENTS.md",
            "/repo/pkg/sub/AGENTS.md",
        ]

    def test_a_file_at_the_root_has_none(self) -> None:
        assert ancestor_instruction_files("/repo/setup.py", "/repo") == []

    @pytest.mark.parametrize("path", ["/elsewhere/x.py", "/repository/x.py", "relative/x.py", "/repo"])
    def test_paths_outside_the_root_have_none(self, path: str) -> None:
        assert ancestor_instruction_files(path, "/repo") == []

    def test_reading_an_instruction_file_does_not_append_itself(self) -> None:
        assert ancestor_instruction_files("/repo/pkg/sub/AGENTS.md", "/repo") == ["/repo/pkg/AGENTS.md"]

    def test_dot_segments_are_resolved(self) -> None:
        assert ancestor_instruction_files("/repo/pkg/../pkg/sub/./a.py", "/repo/") == [
            "/repo/pkg/AGENTS.md",
            "/repo/pkg/sub/AGENTS.md",
        ]


class TestScopedInstructions:
    async def test_ancestor_files_are_appended_once_per_run(
        self, backend: FilesystemBackend, checkpointer: AsyncRedisSaver, thread_id: str
    ) -> None:
        script = (
            Script()
            .tool_call("read_file", file_path="/repo/pkg/sub/a.py")
            .tool_call("read_file", file_path="/repo/pkg/sub/b.py")
            .reply("read both")
            .tool_call("read_file", file_path="/repo/pkg/sub/b.py")
            .reply("read again")
        )
        async with ScriptedModelServer(script) as server:
            # The worker builds each run's middleware anew.
            runs = []
            for text in ("read", "again"):
                middleware = ScopedInstructions(BackendInstructionFiles(backend), "/repo")
                agent = create_deep_agent(
                    chat_model(server), [], backend=backend, middleware=[middleware], checkpointer=checkpointer
                )
                runs.append(await agent.ainvoke({"messages": [HumanMessage(text)]}, run_config(thread_id)))
        first, second = runs

        a, b = _reads(first["messages"])
        assert "print('a')" in a
        assert a.index("Package rule: use tabs.") < a.index("Subpackage rule: no globals.")
        assert "Root rules" not in a
        assert "print('b')" in b
        assert "rule" not in b
        b_again = _reads(second["messages"])[-1]
        assert "Package rule: use tabs." in b_again
        assert "Subpackage rule: no globals." in b_again
        assert "Package rule: use tabs." in server.requests[1].texts("tool")[0]

    async def test_each_conversation_of_a_run_gets_them_once(
        self, backend: FilesystemBackend, checkpointer: AsyncRedisSaver, thread_id: str
    ) -> None:
        """One instance serves a run: the agent's conversation (a resumed turn and the next in
        it) and each subagent call's, which is a conversation of its own."""
        script = (
            Script()
            .tool_call("read_file", file_path="/repo/pkg/sub/a.py")
            .reply("read")
            .tool_call("read_file", file_path="/repo/pkg/sub/a.py")
            .reply("read again")
            .tool_call("read_file", file_path="/repo/pkg/sub/a.py")
            .reply("read elsewhere")
        )
        async with ScriptedModelServer(script) as server:
            middleware = ScopedInstructions(BackendInstructionFiles(backend), "/repo")
            agent = create_deep_agent(
                chat_model(server), [], backend=backend, middleware=[middleware], checkpointer=checkpointer
            )
            first = await agent.ainvoke({"messages": [HumanMessage("read")]}, run_config(thread_id))
            same = await agent.ainvoke({"messages": [HumanMessage("again")]}, run_config(thread_id))
            other = await agent.ainvoke({"messages": [HumanMessage("read")]}, run_config(f"{thread_id}-task"))

        assert "Package rule: use tabs." in _reads(first["messages"])[-1]
        assert "<instructions" not in _reads(same["messages"])[-1]
        assert "Package rule: use tabs." in _reads(other["messages"])[-1]

    async def test_files_outside_the_repository_get_nothing(self, backend: FilesystemBackend) -> None:
        script = Script().tool_call("read_file", file_path="/elsewhere/x.py").reply("done")
        async with ScriptedModelServer(script) as server:
            middleware = ScopedInstructions(BackendInstructionFiles(backend), "/repo")
            agent = create_deep_agent(chat_model(server), [], backend=backend, middleware=[middleware])
            result = await agent.ainvoke({"messages": [HumanMessage("read")]})

        (read,) = _reads(result["messages"])
        assert "x = 1" in read
        assert "Not ours." not in read

    async def test_a_directory_without_an_instruction_file_adds_nothing(self, backend: FilesystemBackend) -> None:
        script = Script().tool_call("read_file", file_path="/repo/docs/guide.md").reply("done")
        async with ScriptedModelServer(script) as server:
            middleware = ScopedInstructions(BackendInstructionFiles(backend), "/repo")
            agent = create_deep_agent(chat_model(server), [], backend=backend, middleware=[middleware])
            result = await agent.ainvoke({"messages": [HumanMessage("read")]})

        (read,) = _reads(result["messages"])
        assert "<instructions" not in read

    async def test_a_failed_read_gets_nothing(self, backend: FilesystemBackend) -> None:
        script = Script().tool_call("read_file", file_path="/repo/pkg/missing.py").reply("done")
        async with ScriptedModelServer(script) as server:
            middleware = ScopedInstructions(BackendInstructionFiles(backend), "/repo")
            agent = create_deep_agent(chat_model(server), [], backend=backend, middleware=[middleware])
            result = await agent.ainvoke({"messages": [HumanMessage("read")]})

        (read,) = _reads(result["messages"])
        assert "Package rule" not in read

    async def test_without_a_reader_it_does_nothing(self, backend: FilesystemBackend) -> None:
        script = Script().tool_call("read_file", file_path="/repo/pkg/sub/a.py").reply("done")
        async with ScriptedModelServer(script) as server:
            agent = create_deep_agent(
                chat_model(server), [], backend=backend, middleware=[ScopedInstructions(None, "/repo")]
            )
            result = await agent.ainvoke({"messages": [HumanMessage("read")]})

        (read,) = _reads(result["messages"])
        assert "print('a')" in read
        assert "<instructions" not in read

    async def test_a_reader_failure_leaves_the_read_alone_and_is_retried(self, backend: FilesystemBackend) -> None:
        class FlakyReader:
            def __init__(self) -> None:
                self.attempts = 0
                self.inner = BackendInstructionFiles(backend)

            async def read_texts(self, paths: Sequence[str]) -> dict[str, str]:
                self.attempts += 1
                if self.attempts == 1:
                    raise ConnectionError("sandbox unreachable")
                return await self.inner.read_texts(paths)

        reader = FlakyReader()
        script = (
            Script()
            .tool_call("read_file", file_path="/repo/pkg/sub/a.py")
            .tool_call("read_file", file_path="/repo/pkg/sub/b.py")
            .reply("done")
        )
        async with ScriptedModelServer(script) as server:
            agent = create_deep_agent(
                chat_model(server), [], backend=backend, middleware=[ScopedInstructions(reader, "/repo")]
            )
            result = await agent.ainvoke({"messages": [HumanMessage("read")]})

        a, b = _reads(result["messages"])
        assert "print('a')" in a
        assert "<instructions" not in a
        assert "Package rule: use tabs." in b
        assert reader.attempts == 2


class TestBackendInstructionFiles:
    """Instruction files are the sandbox's files: from a real sandbox, one over the byte limit
    is not downloaded, however many ancestors link to it."""

    @pytest.fixture
    async def sandbox(
        self,
        local_provider: LocalProvider,  # noqa: F811 (the imported fixture)
    ) -> AsyncIterator[SandboxBackend]:
        backend = SandboxBackend(await local_provider.create(str(uuid.uuid4())))
        yield backend
        await backend.aclose()

    async def test_files_over_the_limit_are_left_out(self, sandbox: SandboxBackend) -> None:
        root = f"{sandbox.handle.workspace}/repo"
        made = await sandbox.run(
            f"""set -e; mkdir -p {root}/a/b/c/d; truncate -s {60 * 1024 * 1024} {root}/big
            for d in a a/b a/b/c; do ln -s {root}/big {root}/$d/AGENTS.md; done
            echo 'Deepest rule.' > {root}/a/b/c/d/AGENTS.md"""
        )
        assert made.exit_code == 0, made.output
        paths = ancestor_instruction_files(f"{root}/a/b/c/d/x.py", root)
        assert len(paths) == 4
        # The backend reads at most what a request for files of this size can bring back.
        assert await BackendInstructionFiles(sandbox).read_texts(paths) == {
            f"{root}/a/b/c/d/AGENTS.md": "Deepest rule.\n"
        }

    async def test_long_files_are_cut_where_they_are_appended(self, sandbox: SandboxBackend) -> None:
        root = f"{sandbox.handle.workspace}/repo"
        made = await sandbox.run(f"mkdir -p {root}/a && head -c 30000 /dev/zero | tr '\\0' y > {root}/a/AGENTS.md")
        assert made.exit_code == 0, made.output
        texts = await BackendInstructionFiles(sandbox).read_texts([f"{root}/a/AGENTS.md"])
        assert capped(texts[f"{root}/a/AGENTS.md"]) == "y" * MAX_INSTRUCTION_CHARS + "\n[… truncated]"
