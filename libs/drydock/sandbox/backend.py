"""The deepagents backend over a sandbox daemon: ``aexecute``, ``aupload_files`` and
``adownload_files`` are native HTTP calls; ls/read/write/edit/grep/glob come from
:class:`~deepagents.backends.sandbox.BaseSandbox`, which runs them through ``aexecute``.

The code is async-only: the synchronous methods the base class declares abstract raise
:class:`NotImplementedError`, and so does every inherited synchronous helper built on them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shlex
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from deepagents.backends.protocol import DeleteResult, ExecuteResponse, FileDownloadResponse, FileUploadResponse
from deepagents.backends.sandbox import BaseSandbox

from drydock.sandbox.daemon import protocol
from drydock.sandbox.daemon_http import daemon_session
from drydock.sandbox.errors import SandboxBusy, SandboxUnavailable
from drydock.sandbox.handle import SandboxHandle

_ASYNC_ONLY = "Drydock sandboxes are async-only: use the a-prefixed method"


@dataclass(frozen=True)
class CommandResult:
    """The daemon's full answer to one command."""

    exit_code: int
    output: str
    truncated: bool
    timed_out: bool
    duration_ms: float


class SandboxBackend(BaseSandbox):
    """One sandbox, reached through its daemon at ``handle.base_url``.

    ``environment`` is added to every command (the lifecycle manager puts the credential
    grant's placeholders there); ``on_use`` is awaited after every command (the lifecycle
    manager records the sandbox's use with it). A daemon that is busy (429) is retried ``busy_retries`` times
    before :class:`SandboxBusy`; an unreachable daemon raises :class:`SandboxUnavailable`.
    """

    def __init__(
        self,
        handle: SandboxHandle,
        *,
        default_timeout: float = 120.0,
        max_timeout: float = 3600.0,
        busy_retries: int = 5,
        connect_timeout: float = 5.0,
        health_timeout: float = 2.0,
    ) -> None:
        self.handle = handle
        self.environment: dict[str, str] = {}
        self.on_use: Callable[[], Awaitable[None]] | None = None
        self._default_timeout = default_timeout
        self._max_timeout = max_timeout
        self._busy_retries = busy_retries
        self._connect_timeout = connect_timeout
        self._health_timeout = health_timeout
        self._session: aiohttp.ClientSession | None = None

    @property
    def id(self) -> str:
        return self.handle.id

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _http(self) -> aiohttp.ClientSession:
        # Made at the first request: a session belongs to the running event loop.
        if self._session is None:
            self._session = daemon_session(self.handle)
        return self._session

    def _timeout(self, read_timeout: float) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout, sock_read=read_timeout)

    async def _post(self, path: str, body: Mapping[str, Any], *, read_timeout: float) -> Any:
        for attempt in range(self._busy_retries + 1):
            try:
                async with self._http().post(path, json=body, timeout=self._timeout(read_timeout)) as response:
                    status, raw = response.status, await response.read()
                    retry_after = response.headers.get("Retry-After", "1")
            except (aiohttp.ClientError, TimeoutError) as error:
                raise SandboxUnavailable(f"sandbox {self.id}: {path} failed: {error!r}") from error
            if status == 429 and attempt < self._busy_retries:
                await asyncio.sleep(min(float(retry_after), 0.05 * 2**attempt))
                continue
            if status == 429:
                raise SandboxBusy(f"sandbox {self.id}: {_error_text(raw)}")
            if status != 200:
                raise SandboxUnavailable(f"sandbox {self.id}: {path} answered {status}: {_error_text(raw)}")
            return json.loads(raw)
        raise AssertionError("unreachable")

    async def health(self) -> dict[str, Any]:
        """The daemon's health document; :class:`SandboxUnavailable` if it does not answer ok."""
        try:
            timeout = aiohttp.ClientTimeout(total=self._health_timeout)
            async with self._http().get(protocol.HEALTH, timeout=timeout) as response:
                status, raw = response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise SandboxUnavailable(f"sandbox {self.id}: health check failed: {error!r}") from error
        if status != 200:
            raise SandboxUnavailable(f"sandbox {self.id}: health answered {status}: {_error_text(raw)}")
        document: dict[str, Any] = json.loads(raw)
        return document

    async def is_healthy(self) -> bool:
        try:
            await self.health()
        except SandboxUnavailable:
            return False
        return True

    async def run(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        time_limit: float | None = None,
        output_cap: int | None = None,
    ) -> CommandResult:
        """Run ``command`` through the sandbox's shell; ``time_limit`` in seconds (the backend's
        default when ``None``). ``env`` is added to :attr:`environment`."""
        limit = self._default_timeout if time_limit is None else time_limit
        body: dict[str, Any] = {"command": command, "timeout": limit, "env": self.environment | dict(env or {})}
        if cwd is not None:
            body["cwd"] = cwd
        if output_cap is not None:
            body["output_cap"] = output_cap
        answer = await self._post(protocol.EXEC, body, read_timeout=limit + 30.0)
        if self.on_use is not None:
            await self.on_use()
        return CommandResult(
            exit_code=answer["exit_code"],
            output=answer["output"],
            truncated=answer["truncated"],
            timed_out=answer["timed_out"],
            duration_ms=answer["duration_ms"],
        )

    async def aexecute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:  # noqa: ASYNC109
        """deepagents' execute: ``timeout`` in seconds, ``None`` for the default, ``0`` for the
        longest this backend allows."""
        limit = None if timeout is None else (self._max_timeout if timeout <= 0 else float(timeout))
        result = await self.run(command, time_limit=limit)
        output = result.output
        if result.truncated:
            output += "\n[output truncated: the command wrote more than the sandbox keeps]"
        if result.timed_out:
            output += (
                f"\n[timed out after {limit or self._default_timeout:g} s: "
                "the command and every process it started were killed]"
            )
        return ExecuteResponse(output=output, exit_code=result.exit_code, truncated=result.truncated)

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        body = {"files": [{"path": path, "content_b64": base64.b64encode(content).decode()} for path, content in files]}
        answer = await self._post(protocol.UPLOAD, body, read_timeout=120.0)
        return [FileUploadResponse(path=item["path"], error=item["error"]) for item in answer["results"]]

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        answer = await self._post(protocol.DOWNLOAD, {"paths": paths}, read_timeout=120.0)
        return [
            FileDownloadResponse(
                path=item["path"],
                content=None if item["content_b64"] is None else base64.b64decode(item["content_b64"]),
                error=item["error"],
            )
            for item in answer["results"]
        ]

    async def adelete(self, file_path: str) -> DeleteResult:
        quoted = shlex.quote(file_path)
        exists = await self.aexecute(f"test -e {quoted} || test -L {quoted}")
        if exists.exit_code != 0:
            return DeleteResult(error=f"Error: '{file_path}' not found")
        result = await self.aexecute(f"rm -rf {quoted}")
        if result.exit_code == 0:
            return DeleteResult(path=file_path)
        return DeleteResult(error=f"Error deleting file '{file_path}': {result.output.strip() or 'unknown error'}")

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        raise NotImplementedError(_ASYNC_ONLY)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        raise NotImplementedError(_ASYNC_ONLY)

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        raise NotImplementedError(_ASYNC_ONLY)


def _error_text(raw: bytes) -> str:
    try:
        return str(json.loads(raw)["error"])
    except (ValueError, KeyError, TypeError):
        return raw.decode(errors="replace")[:200]
