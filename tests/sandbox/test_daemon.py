"""The sandbox daemon as a real process, spoken to over HTTP: request validation, the exec
bound, shutdown, token handling, and that it needs nothing beyond the standard library and h11."""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.daemon import protocol
from drydock.sandbox.errors import SandboxBusy
from drydock.sandbox.handle import Isolation, SandboxHandle
from tests.waiting import eventually


@dataclass
class RunningDaemon:
    process: asyncio.subprocess.Process
    base_url: str
    token: str
    workspace: Path

    def client(self) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self.token}"}
        return httpx.AsyncClient(base_url=self.base_url, headers=headers, trust_env=False, timeout=30)

    def backend(self, **options: float) -> SandboxBackend:
        handle = SandboxHandle(
            id="sbx-daemon-test",
            provider="test",
            thread_id="t",
            base_url=self.base_url,
            token=self.token,
            workspace=str(self.workspace),
            created_at=__import__("datetime").datetime.now(),
            isolation=Isolation.NONE,
        )
        return SandboxBackend(handle, **options)  # type: ignore[arg-type]


async def _wait_healthy(daemon: RunningDaemon) -> None:
    async with daemon.client() as client:

        async def healthy() -> bool:
            try:
                return (await client.get(protocol.HEALTH)).status_code == 200
            except httpx.TransportError:
                return False

        await eventually(healthy, what="the daemon healthy")


@asynccontextmanager
async def start_daemon(tmp_path: Path, *options: str, token_file: bool = False) -> AsyncIterator[RunningDaemon]:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    token = secrets.token_urlsafe(24)
    listener = socket.create_server(("127.0.0.1", 0))
    argv = [sys.executable, "-I", "-m", "drydock.sandbox.daemon", "--workspace", str(workspace)]
    argv += ["--listen-fd", str(listener.fileno()), *options]
    if token_file:
        (tmp_path / "token").write_text(token)
        argv += ["--token-file", str(tmp_path / "token")]
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        pass_fds=(listener.fileno(),),
        env={"PATH": "/usr/bin:/bin", "DAEMON_VARIABLE": "visible"},
    )
    listener_port = listener.getsockname()[1]
    listener.close()
    assert process.stdin is not None
    if not token_file:
        process.stdin.write(token.encode() + b"\n")
    process.stdin.close()
    daemon = RunningDaemon(process, f"http://127.0.0.1:{listener_port}", token, workspace)
    try:
        await _wait_healthy(daemon)
        yield daemon
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def _post(daemon: RunningDaemon, path: str, **kwargs: object) -> httpx.Response:
    async with daemon.client() as client:
        return await client.post(path, **kwargs)  # type: ignore[arg-type]


async def test_malformed_requests_get_a_400_that_says_why(tmp_path: Path) -> None:
    async with start_daemon(tmp_path) as daemon, daemon.client() as client:
        cases: list[tuple[dict[str, object], str]] = [
            ({"content": b"{not json"}, "not valid JSON"),
            ({"json": ["a", "list"]}, "must be a JSON object"),
            ({"json": {}}, "'command' is required"),
            ({"json": {"command": 42}}, "'command' has the wrong type"),
            ({"json": {"command": "   "}}, "non-empty"),
            ({"json": {"command": "true", "timeout": -1}}, "timeout must be in"),
            ({"json": {"command": "true", "timeout": True}}, "'timeout' has the wrong type"),
            ({"json": {"command": "true", "output_cap": 10**12}}, "output_cap must be in"),
            ({"json": {"command": "true", "cwd": "no/such/dir"}}, "is not a directory"),
            ({"json": {"command": "true", "env": {"A=B": "x"}}}, "env entry"),
            ({"json": {"command": "true", "env": {"A": 1}}}, "env entry"),
        ]
        for request, message in cases:
            response = await client.post(protocol.EXEC, **request)  # type: ignore[arg-type]
            assert response.status_code == 400, (request, response.text)
            assert message in response.json()["error"]
        upload = await client.post(protocol.UPLOAD, json={"files": [{"path": "a", "content_b64": "%%%"}]})
        assert (upload.status_code, upload.json()["error"]) == (400, "files[0].content_b64 is not base64")
        download = await client.post(protocol.DOWNLOAD, json={"paths": ["a", 3]})
        assert (download.status_code, download.json()["error"]) == (400, "paths must be a list of strings")
        limited = await client.post(protocol.DOWNLOAD, json={"paths": ["a"], "max_file_bytes": -1})
        assert (limited.status_code, limited.json()["error"]) == (400, "max_file_bytes must not be negative, not -1")


async def test_unknown_routes_and_methods_are_answered_after_authentication(tmp_path: Path) -> None:
    async with start_daemon(tmp_path) as daemon, daemon.client() as client:
        missing = await client.get("/nowhere")
        assert (missing.status_code, missing.json()["error"]) == (404, "no such endpoint: /nowhere")
        wrong = await client.get(protocol.EXEC)
        assert (wrong.status_code, wrong.headers["Allow"]) == (405, "POST")
        unauthenticated = await client.get("/nowhere", headers={"Authorization": "Bearer nope"})
        assert unauthenticated.status_code == 401
        assert unauthenticated.headers["WWW-Authenticate"] == "Bearer"


async def test_oversized_bodies_are_refused_whether_sized_or_chunked(tmp_path: Path) -> None:
    async with start_daemon(tmp_path, "--max-request-bytes", "1000") as daemon:
        too_big = await _post(daemon, protocol.EXEC, json={"command": "x" * 2000})
        assert (too_big.status_code, too_big.json()["error"]) == (413, "the request body exceeds 1000 bytes")

        def chunked(*parts: bytes) -> Callable[[], AsyncIterator[bytes]]:
            async def chunks() -> AsyncIterator[bytes]:
                for part in parts:
                    yield part

            return chunks

        small = await _post(daemon, protocol.EXEC, content=chunked(b'{"command": ', b'"echo chunked"}')())
        assert (small.status_code, small.json()["output"]) == (200, "chunked\n")
        big = await _post(daemon, protocol.EXEC, content=chunked(b'{"command": "', b"x" * 2000, b'"}')())
        assert big.status_code == 413
        assert (await _post(daemon, protocol.EXEC, json={"command": "true"})).status_code == 200


async def _exchange(daemon: RunningDaemon, data: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """Send raw bytes on one connection; the responses until the daemon closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", int(daemon.base_url.rsplit(":", 1)[1]))
    writer.write(data)
    raw = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    responses = []
    while raw:
        head, _, raw = raw.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
        length = int(headers["content-length"])
        responses.append((int(status_line.split(" ")[1]), headers, raw[:length]))
        raw = raw[length:]
    return responses


async def test_protocol_errors_and_limits_are_answered_in_json_and_keep_alive_is_kept(tmp_path: Path) -> None:
    async with start_daemon(tmp_path, "--max-request-bytes", "1000") as daemon:
        auth = f"Host: d\r\nAuthorization: Bearer {daemon.token}\r\n".encode()
        health = b"GET /health HTTP/1.1\r\n" + auth + b"\r\n"
        [(first, _, _), (second, headers, _)] = await _exchange(
            daemon, health + b"GET /health HTTP/1.1\r\n" + auth + b"Connection: close\r\n\r\n"
        )
        assert (first, second, headers["connection"]) == (200, 200, "close")

        # The body is never sent: the answer must not wait for it.
        [(status, headers, body)] = await _exchange(
            daemon, b"POST /exec HTTP/1.1\r\n" + auth + b"Content-Length: 1000000\r\n\r\n"
        )
        assert (status, headers["connection"]) == (413, "close")
        assert json.loads(body) == {"error": "the request body exceeds 1000 bytes"}

        [(status, _, body)] = await _exchange(daemon, health[:-2] + b"X: " + b"a" * 70_000 + b"\r\n\r\n")
        assert (status, json.loads(body)) == (431, {"error": "the request line and headers exceed 64 KiB"})

        [(status, _, body)] = await _exchange(daemon, b"NOT HTTP\r\n\r\n")
        assert status == 400
        assert json.loads(body)["error"].startswith("malformed request")


async def test_commands_beyond_the_bound_wait_in_the_queue(tmp_path: Path) -> None:
    async with start_daemon(tmp_path, "--max-concurrent-execs", "1", "--max-queued-execs", "4") as daemon:
        backend = daemon.backend()
        started = time.monotonic()
        results = await asyncio.gather(*(backend.run("sleep 0.4; echo done") for _ in range(3)))
        assert [result.output for result in results] == ["done\n"] * 3
        assert time.monotonic() - started >= 1.2
        await backend.aclose()


async def test_a_full_queue_is_answered_429_and_the_backend_gives_up_with_sandbox_busy(tmp_path: Path) -> None:
    async with start_daemon(tmp_path, "--max-concurrent-execs", "1", "--max-queued-execs", "0") as daemon:
        backend = daemon.backend(busy_retries=0)
        running = asyncio.create_task(backend.run("sleep 1"))
        async with daemon.client() as client:

            async def one_running() -> bool:
                return bool((await client.get(protocol.HEALTH)).json()["running_execs"] == 1)

            await eventually(one_running, what="one command running")
            refused = await client.post(protocol.EXEC, json={"command": "true"})
        assert (refused.status_code, refused.headers["Retry-After"]) == (429, "1")
        assert "too many commands" in refused.json()["error"]
        with pytest.raises(SandboxBusy):
            await backend.run("true")
        assert (await running).exit_code == 0
        retrying = daemon.backend(busy_retries=5)
        assert (await asyncio.gather(retrying.run("sleep 0.2"), retrying.run("echo later")))[1].output == "later\n"
        await backend.aclose()
        await retrying.aclose()


async def test_the_token_never_reaches_commands(tmp_path: Path) -> None:
    async with start_daemon(tmp_path) as daemon:
        backend = daemon.backend()
        seen = await backend.run("env; tr '\\0' '\\n' < /proc/$PPID/environ; tr '\\0' ' ' < /proc/$PPID/cmdline")
        assert "DAEMON_VARIABLE=visible" in seen.output
        assert daemon.token not in seen.output
        await backend.aclose()


async def test_a_token_file_is_read_and_removed(tmp_path: Path) -> None:
    async with start_daemon(tmp_path, token_file=True) as daemon:
        assert not (tmp_path / "token").exists()
        async with daemon.client() as client:
            assert (await client.get(protocol.HEALTH)).status_code == 200


async def test_sigterm_stops_the_daemon_and_kills_running_commands(tmp_path: Path) -> None:
    async with start_daemon(tmp_path) as daemon:
        backend = daemon.backend()
        pid_file = daemon.workspace / "pid"
        running = asyncio.create_task(backend.run(f"sleep 60 & echo $! > {pid_file}; wait"))
        await eventually(lambda: _has_text(pid_file))
        pid = int(pid_file.read_text())
        daemon.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(daemon.process.wait(), 10) == 0
        await eventually(lambda: _gone(pid))
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await backend.aclose()


async def test_the_daemon_imports_only_the_standard_library_and_h11() -> None:
    probe = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import drydock.sandbox.daemon.__main__\n"
        "print(__import__('json').dumps(sorted(set(sys.modules) - before)))\n"
    )
    process = await asyncio.create_subprocess_exec(sys.executable, "-I", "-c", probe, stdout=asyncio.subprocess.PIPE)
    out, _ = await process.communicate()
    loaded = json.loads(out)
    own = {name for name in loaded if name.split(".")[0] == "drydock"}
    assert own <= {"drydock", "drydock.sandbox"} | {name for name in own if name.startswith("drydock.sandbox.daemon")}
    foreign = {name.split(".")[0] for name in loaded} - set(sys.stdlib_module_names) - {"drydock"}
    assert {name for name in foreign if not name.startswith("_")} == {"h11"}


def _has_text(path: Path) -> bool:
    return path.exists() and bool(path.read_text().strip())


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


async def test_a_commands_git_requests_carry_the_exec_requests_trace(tmp_path: Path) -> None:
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    show = "printf '%s|' \"$TRACEPARENT\"; git config --get-all http.extraHeader"
    async with start_daemon(tmp_path) as daemon:
        traced = await _post(daemon, protocol.EXEC, json={"command": show}, headers={"traceparent": traceparent})
        forged = await _post(
            daemon, protocol.EXEC, json={"command": show}, headers={"traceparent": f"{traceparent}, http.proxy=x"}
        )
        untraced = await _post(daemon, protocol.EXEC, json={"command": show})
    assert traced.json()["output"] == f"{traceparent}|traceparent: {traceparent}\n"
    assert forged.json()["output"] == untraced.json()["output"] == "|"
