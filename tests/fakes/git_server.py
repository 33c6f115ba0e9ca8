"""An upstream git server for tests: the real ``git http-backend`` (smart HTTP, protocol v0 to
v2) behind a small aiohttp server on loopback, laid out like github.com
(``{base_url}/{owner}/{name}.git``).

Like GitHub it takes the installation token as the basic-auth password
(``x-access-token:<token>``) and asks ``authorize(token, "owner/name")`` for the token's access
before serving: no credential or an unknown one is a 401, a token without read access a 404,
a push without write access a 403. Bodies stream in both directions; nothing is buffered whole.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
import re
import socket
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal

from aiohttp import web

Access = Literal["invalid", "none", "read", "write"]
Authorize = Callable[[str, str], Access]
"""``(token, "owner/name") -> access``: ``invalid`` for an unknown or expired token."""

_REPO_PATH = re.compile(r"^/(?P<owner>[\w.-]+)/(?P<name>[\w.-]+?)(?:\.git)?/(?P<tail>.*)$")
_CHUNK = 1 << 16
_IDENTITY = {
    "GIT_AUTHOR_NAME": "Fixture",
    "GIT_AUTHOR_EMAIL": "fixture@example.com",
    "GIT_COMMITTER_NAME": "Fixture",
    "GIT_COMMITTER_EMAIL": "fixture@example.com",
}


class GitError(RuntimeError):
    """A git command failed; the message carries its output."""


def isolated_git_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment for git with ``home`` as HOME and no system or user configuration leaking in."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
        **_IDENTITY,
        **(extra or {}),
    }


async def git(*args: str, cwd: Path | None = None, env: Mapping[str, str]) -> str:
    """Run ``git args…``; return its stdout, raise :class:`GitError` with its output on failure."""
    process = await asyncio.create_subprocess_exec(
        "git",
        *args,
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        raise GitError(f"git {' '.join(args)} exited {process.returncode}:\n{err.decode(errors='replace')}")
    return out.decode(errors="replace")


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    token: str | None


class GitServer:
    """``async with GitServer(root, authorize=…) as server:`` serves the bare repositories under
    ``root`` at ``server.base_url``. ``authorize=None`` serves everyone, anonymously."""

    def __init__(self, root: Path, *, authorize: Authorize | None = None, host: str = "127.0.0.1") -> None:
        self.root = root
        self.host = host
        self._authorize = authorize
        self.requests: list[SeenRequest] = []
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise RuntimeError("GitServer is not serving; use it as an async context manager")
        return f"http://{self.host}:{self._port}"

    def repository_path(self, full_name: str) -> Path:
        return self.root / f"{full_name}.git"

    async def create_repository(self, full_name: str, files: Mapping[str, bytes], *, branch: str = "main") -> Path:
        """A bare repository ``owner/name`` with one commit holding ``files`` on ``branch``."""
        bare = self.repository_path(full_name)
        bare.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="git-fixture-") as scratch:
            env = isolated_git_env(Path(scratch))
            await git("init", "-q", "--bare", "-b", branch, str(bare), env=env)
            work = Path(scratch) / "work"
            await git("init", "-q", "-b", branch, str(work), env=env)
            for name, content in files.items():
                target = work / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
            await git("add", "-A", cwd=work, env=env)
            await git("commit", "-q", "-m", "initial", cwd=work, env=env)
            await git("push", "-q", str(bare), f"{branch}:{branch}", cwd=work, env=env)
        return bare

    async def __aenter__(self) -> GitServer:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._handle)
        # Bodies pass to git http-backend as sent (it inflates gzip itself).
        self._runner = web.AppRunner(app, auto_decompress=False, access_log=None)
        await self._runner.setup()
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that name it, and without
        # it every reused keep-alive connection waits ~40 ms for a delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind((self.host, 0))
        await web.SockSite(self._runner, sock).start()
        self._port = sock.getsockname()[1]
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        self._runner = None
        self._port = None

    def _token(self, request: web.Request) -> str | None:
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            _, _, password = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return password or None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        match = _REPO_PATH.match(request.path)
        token = self._token(request)
        self.requests.append(SeenRequest(request.method, request.path_qs, token))
        if match is None:
            return web.Response(status=404, text="Not Found\n")
        full_name = f"{match['owner']}/{match['name']}"
        write = match["tail"] == "git-receive-pack" or request.query.get("service") == "git-receive-pack"
        if self._authorize is not None:
            access = "invalid" if token is None else self._authorize(token, full_name)
            if access == "invalid":
                return web.Response(
                    status=401,
                    text="Invalid username or token.\n",
                    headers={"WWW-Authenticate": 'Basic realm="GitHub"'},
                )
            if access == "none":
                return web.Response(status=404, text="Repository not found.\n")
            if write and access != "write":
                return web.Response(status=403, text=f"Permission to {full_name}.git denied.\n")
        if not self.repository_path(full_name).is_dir():
            return web.Response(status=404, text="Repository not found.\n")
        return await self._backend(request, f"/{full_name}.git/{match['tail']}")

    async def _backend(self, request: web.Request, path_info: str) -> web.StreamResponse:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(self.root),
            "PATH_INFO": path_info,
            "REQUEST_METHOD": request.method,
            "QUERY_STRING": request.query_string,
            "CONTENT_TYPE": request.headers.get("Content-Type", ""),
            "REMOTE_USER": "x-access-token",
            "REMOTE_ADDR": request.remote or "127.0.0.1",
        }
        if "Content-Length" in request.headers:
            env["CONTENT_LENGTH"] = request.headers["Content-Length"]
        if "Content-Encoding" in request.headers:
            env["HTTP_CONTENT_ENCODING"] = request.headers["Content-Encoding"]
        if "Git-Protocol" in request.headers:
            env["GIT_PROTOCOL"] = request.headers["Git-Protocol"]
        process = await asyncio.create_subprocess_exec(
            "git",
            "http-backend",
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        feeding = asyncio.create_task(self._feed(request, process.stdin))
        draining = asyncio.create_task(process.stderr.read())
        try:
            head = await process.stdout.readuntil(b"\r\n\r\n")
            status, headers = _cgi_headers(head)
            response = web.StreamResponse(status=status, headers=headers)
            if "Content-Length" in headers:
                response.content_length = int(headers["Content-Length"])
            await response.prepare(request)
            while chunk := await process.stdout.read(_CHUNK):
                await response.write(chunk)
            await response.write_eof()
            return response
        finally:
            await feeding
            await process.wait()
            await draining

    @staticmethod
    async def _feed(request: web.Request, stdin: asyncio.StreamWriter) -> None:
        try:
            async for chunk in request.content.iter_chunked(_CHUNK):
                stdin.write(chunk)
                await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            return
        finally:
            stdin.close()


def _cgi_headers(head: bytes) -> tuple[int, dict[str, str]]:
    status = 200
    headers: dict[str, str] = {}
    for line in head.decode("latin-1").split("\r\n"):
        if not line:
            continue
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.strip().split()[0])
        else:
            headers[name.strip()] = value.strip()
    return status, headers
