"""The deepagents backend over a real local sandbox: deepagents' own file and shell tools run
through it (their async variants), and the synchronous ones refuse."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web
from deepagents.middleware.filesystem import FilesystemMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.daemon_http import daemon_client, health_status
from drydock.sandbox.errors import SandboxBusy, SandboxUnavailable
from drydock.sandbox.handle import Isolation, SandboxHandle
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


class Reply:
    """One answer of a :class:`HostileDaemon`, counting the body bytes it got out."""

    def __init__(self, request: web.Request, response: web.StreamResponse) -> None:
        self.request = request
        self.response = response
        self.sent = 0

    async def start(self, *, status: int = 200, length: int | None = None) -> None:
        self.response.set_status(status)
        if length is None:
            self.response.enable_chunked_encoding()
        else:
            self.response.content_length = length
        await self.response.prepare(self.request)

    async def write(self, data: bytes) -> None:
        await self.response.write(data)
        self.sent += len(data)


Answer = Callable[[Reply], Awaitable[None]]


class HostileDaemon:
    """Whatever took over a daemon's port: an aiohttp server answering every request with
    ``answer``, which counts the body bytes it got out before the backend hung up."""

    def __init__(self, answer: Answer, **headers: str) -> None:
        self.answer = answer
        self.headers = headers
        self.sent = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        reply = Reply(request, web.StreamResponse(headers={"Content-Type": "application/json", **self.headers}))
        try:
            await self.answer(reply)
        except ConnectionError:
            pass
        finally:
            self.sent += reply.sent
        return reply.response

    @contextlib.asynccontextmanager
    async def serving(self, **options: Any) -> AsyncIterator[SandboxBackend]:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        listener = socket.create_server(("127.0.0.1", 0))
        site = web.SockSite(runner, listener)
        await site.start()
        handle = SandboxHandle(
            id="sbx-hostile",
            provider="test",
            thread_id="t",
            base_url=f"http://127.0.0.1:{listener.getsockname()[1]}",
            token="token",
            workspace="/workspace",
            created_at=datetime.now(UTC),
            isolation=Isolation.NONE,
        )
        backend = SandboxBackend(handle, **options)
        try:
            yield backend
        finally:
            await backend.aclose()
            await runner.cleanup()


HUGE = 256 * 1024 * 1024
EXEC_ANSWER = b'{"exit_code": 0, "truncated": false, "timed_out": false, "duration_ms": 1, "output": "'


async def flood(reply: Reply) -> None:
    await reply.write(EXEC_ANSWER)
    chunk = b"A" * (1024 * 1024)
    for _ in range(HUGE // len(chunk)):
        await reply.write(chunk)
    await reply.write(b'"}')


async def declared_flood(reply: Reply) -> None:
    await reply.start(length=len(EXEC_ANSWER) + HUGE + 2)
    await flood(reply)


async def chunked_flood(reply: Reply) -> None:
    await reply.start()
    await flood(reply)


async def drip(reply: Reply) -> None:
    await reply.start(length=1000)
    for _ in range(1000):
        await reply.write(b" ")
        await asyncio.sleep(0.2)


class TestAnswersFromWhateverHoldsTheDaemonsPort:
    """Code in the sandbox can answer on its daemon's port: the worker reads at most what the
    request can bring back, within a deadline, and fails with ``SandboxUnavailable``."""

    @pytest.mark.parametrize("answer", [declared_flood, chunked_flood], ids=["content-length", "chunked"])
    async def test_an_exec_answer_beyond_the_output_cap_is_refused(self, answer: Answer) -> None:
        hostile = HostileDaemon(answer)
        async with hostile.serving() as backend, asyncio.timeout(30):
            with pytest.raises(SandboxUnavailable, match="sbx-hostile: /exec answered more than"):
                await backend.run("true", time_limit=1)
        # The output cap is 1 MiB; what the sockets' buffers took besides is far below the flood.
        assert hostile.sent < 64 * 1024 * 1024

    async def test_a_download_answer_beyond_its_files_limits_is_refused(self) -> None:
        hostile = HostileDaemon(chunked_flood)
        async with hostile.serving(max_file_bytes=1024) as backend:
            with pytest.raises(SandboxUnavailable, match="sbx-hostile: /files/download answered more than"):
                await backend.adownload_files(["a", "b"])
        assert hostile.sent < 64 * 1024 * 1024

    async def test_a_health_answer_of_more_than_a_health_document_is_refused(self) -> None:
        hostile = HostileDaemon(chunked_flood)
        async with hostile.serving(health_timeout=30) as backend:
            with pytest.raises(SandboxUnavailable, match="sbx-hostile: /health answered more than"):
                await backend.health()
        assert hostile.sent < 64 * 1024 * 1024

    async def test_a_dripping_answer_ends_at_the_time_limit_and_the_margin(self) -> None:
        async with HostileDaemon(drip).serving(answer_margin=1) as backend, asyncio.timeout(20):
            with pytest.raises(SandboxUnavailable, match="sbx-hostile: /exec got no whole answer within 2 s"):
                await backend.run("true", time_limit=1)

    async def test_a_compressed_answer_is_not_inflated(self) -> None:
        bomb = gzip.compress(EXEC_ANSWER + b"A" * HUGE + b'"}')

        async def compressed(reply: Reply) -> None:
            await reply.start(length=len(bomb))
            await reply.write(bomb)

        async with HostileDaemon(compressed, **{"Content-Encoding": "gzip"}).serving() as backend:
            with pytest.raises(SandboxUnavailable, match="sbx-hostile: /exec answered what is not JSON"):
                await backend.run("true", time_limit=1)

    async def test_a_busy_answer_with_a_nonsense_retry_after_is_retried(self) -> None:
        async def busy(reply: Reply) -> None:
            await reply.start(status=429)
            await reply.write(b'{"error": "too many commands"}')

        async with HostileDaemon(busy, **{"Retry-After": "soon"}).serving() as backend:
            with pytest.raises(SandboxBusy, match="too many commands"):
                await backend.run("true", time_limit=1)

    @pytest.mark.parametrize(
        ("call", "body", "message"),
        [
            ("exec", b'{"exit_code": 0}', "/exec answered what is not its protocol's answer"),
            ("exec", b'{"exit_code": "zero", "output": [], "truncated": 1, "timed_out": 0, "duration_ms": 1}',
             "/exec answered what is not its protocol's answer"),
            ("download", b'{"results": [{"path": "a", "content_b64": "!!", "error": null}]}', "of a is not base64"),
            ("download", b'{"results": [{"path": "/etc/shadow", "content_b64": "", "error": null}]}',
             "answered for other files"),
            ("download", b'{"results": []}', "answered for other files"),
            ("upload", b'{"results": {"a": null}}', "/files/upload answered what is not its protocol's answer"),
            ("health", b"[]", "/health answered what is not its protocol's answer"),
        ],
    )  # fmt: skip
    async def test_an_answer_not_in_the_protocol_s_shape_is_unavailable(
        self, call: str, body: bytes, message: str
    ) -> None:
        async def answer(reply: Reply) -> None:
            await reply.start(length=len(body))
            await reply.write(body)

        async with HostileDaemon(answer).serving() as backend:
            calls: dict[str, Callable[[], Awaitable[object]]] = {
                "exec": lambda: backend.run("true", time_limit=1),
                "download": lambda: backend.adownload_files(["a"]),
                "upload": lambda: backend.aupload_files([("a", b"x")]),
                "health": backend.health,
            }
            with pytest.raises(SandboxUnavailable, match=message):
                await calls[call]()

    async def test_waiting_for_a_new_daemon_reads_no_body_and_ends_in_time(self) -> None:
        flooding = HostileDaemon(chunked_flood)
        async with flooding.serving() as backend, daemon_client(backend.handle) as client, asyncio.timeout(30):
            assert await health_status(client, within=5) == 200
        assert flooding.sent < 64 * 1024 * 1024

        async def silent(reply: Reply) -> None:
            await asyncio.sleep(3)

        async with HostileDaemon(silent).serving() as backend, daemon_client(backend.handle) as client:
            started = asyncio.get_running_loop().time()
            with pytest.raises(TimeoutError):
                await health_status(client, within=1)
            assert asyncio.get_running_loop().time() - started < 10
