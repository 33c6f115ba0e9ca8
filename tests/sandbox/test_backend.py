"""The deepagents backend over a real local sandbox: deepagents' own file and shell tools run
through it (their async variants), and the synchronous ones refuse."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from deepagents.middleware.filesystem import FilesystemMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.errors import SandboxUnavailable
from drydock.sandbox.providers.local import LocalProvider


@pytest.fixture
async def sandbox(local_provider: LocalProvider) -> AsyncIterator[SandboxBackend]:
    backend = SandboxBackend(await local_provider.create(str(uuid.uuid4())))
    yield backend
    await backend.aclose()


class Tools:
    """deepagents' filesystem and shell tools, run by LangGraph's tool node as an agent would."""

    def __init__(self, backend: SandboxBackend) -> None:
        graph = StateGraph(MessagesState)
        graph.add_node("tools", ToolNode(FilesystemMiddleware(backend=backend).tools))
        graph.add_edge(START, "tools")
        graph.add_edge("tools", END)
        self._graph = graph.compile()

    async def call(self, name: str, **args: Any) -> str:
        call = {"name": name, "args": args, "id": uuid.uuid4().hex, "type": "tool_call"}
        state = await self._graph.ainvoke({"messages": [AIMessage(content="", tool_calls=[call])]})
        reply = state["messages"][-1]
        assert isinstance(reply, ToolMessage)
        assert reply.status == "success", reply.content
        return str(reply.content)


async def test_deepagents_tools_work_through_the_sandbox(sandbox: SandboxBackend) -> None:
    tools = Tools(sandbox)
    root = f"{sandbox.handle.workspace}/project"
    await tools.call("write_file", file_path=f"{root}/src/app.py", content="def greet():\n    return 'hello'\n")
    await tools.call("write_file", file_path=f"{root}/README.md", content="# Project\nhello world\n")
    edited = await tools.call("edit_file", file_path=f"{root}/src/app.py", old_string="'hello'", new_string="'ahoy'")
    assert "replaced 1 instance" in edited
    assert "return 'ahoy'" in await tools.call("read_file", file_path=f"{root}/src/app.py")
    listing = await tools.call("ls", path=root)
    assert f"{root}/README.md" in listing
    assert f"{root}/src" in listing
    assert f"{root}/src/app.py" in await tools.call("glob", pattern="**/*.py", path=root)
    found = await tools.call("grep", pattern="hello world", path=root, output_mode="content")
    assert "README.md" in found
    assert "hello world" in found
    ran = await tools.call("execute", command=f"cd {root}/src && python3 -c 'import app; print(app.greet())'")
    assert ran.startswith("ahoy\n")
    await tools.call("delete", file_path=f"{root}/README.md")
    assert (await sandbox.run(f"test -e {root}/README.md || echo deleted")).output == "deleted\n"


async def test_backend_file_helpers_report_errors_per_file(sandbox: SandboxBackend) -> None:
    missing = await sandbox.aread(f"{sandbox.handle.workspace}/nope.txt")
    assert missing.error is not None
    assert (await sandbox.adelete(f"{sandbox.handle.workspace}/nope.txt")).error == (
        f"Error: '{sandbox.handle.workspace}/nope.txt' not found"
    )
    written = await sandbox.awrite("/etc/drydock-outside.txt", "x")
    assert written.error is not None


async def test_synchronous_methods_refuse(sandbox: SandboxBackend) -> None:
    with pytest.raises(NotImplementedError, match="async-only"):
        sandbox.execute("true")
    with pytest.raises(NotImplementedError, match="async-only"):
        sandbox.upload_files([("a", b"")])
    with pytest.raises(NotImplementedError, match="async-only"):
        sandbox.download_files(["a"])
    with pytest.raises(NotImplementedError, match="async-only"):
        sandbox.ls(sandbox.handle.workspace)


async def test_an_unreachable_daemon_raises_sandbox_unavailable(local_provider: LocalProvider) -> None:
    handle = await local_provider.create(str(uuid.uuid4()))
    backend = SandboxBackend(handle, connect_timeout=1.0)
    assert await backend.is_healthy()
    await local_provider.delete(handle.id)
    assert not await backend.is_healthy()
    with pytest.raises(SandboxUnavailable, match=handle.id):
        await backend.aexecute("true")
    with pytest.raises(SandboxUnavailable):
        await backend.adownload_files(["a"])
    await backend.aclose()


async def test_environment_and_use_hook_apply_to_every_command(sandbox: SandboxBackend) -> None:
    uses = []

    async def used() -> None:
        uses.append(1)

    sandbox.environment = {"GH_TOKEN": "proxy-injected"}
    sandbox.on_use = used
    result = await sandbox.aexecute('echo "$GH_TOKEN"')
    assert result.output == "proxy-injected\n"
    overridden = await sandbox.run('echo "$GH_TOKEN"', env={"GH_TOKEN": "other"})
    assert overridden.output == "other\n"
    assert len(uses) == 2
