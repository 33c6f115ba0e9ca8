"""The deepagents backend over a sandbox daemon: ``aexecute``, ``aupload_files`` and
``adownload_files`` are native HTTP calls; ls/read/write/edit/grep/glob come from
:class:`~deepagents.backends.sandbox.BaseSandbox`, which runs them through ``aexecute``.

The code is async-only: the synchronous methods the base class declares abstract raise
:class:`NotImplementedError`, and so does every inherited synchronous helper built on them.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import shlex
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
from deepagents.backends.protocol import DeleteResult, ExecuteResponse, FileDownloadResponse, FileUploadResponse
from deepagents.backends.sandbox import BaseSandbox
from pydantic import BaseModel, ValidationError

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


class _ExecAnswer(BaseModel):
    exit_code: int
    output: str
    truncated: bool
    timed_out: bool
    duration_ms: float


class _FileAnswer(BaseModel):
    path: str
    error: str | None = None
    content_b64: str | None = None


class _FilesAnswer(BaseModel):
    results: list[_FileAnswer]


class _HealthAnswer(BaseModel, extra="allow"):
    status: str


_Answer = TypeVar("_Answer", bound=BaseModel)


class SandboxBackend(BaseSandbox):
    """One sandbox, reached through its daemon at ``handle.base_url``.

    ``environment`` is added to every command (the lifecycle manager puts the credential
    grant's placeholders there); ``on_use`` is awaited after every command (the lifecycle
    manager records the sandbox's use with it). A daemon that is busy (429) is retried ``busy_retries`` times
    before :class:`SandboxBusy`; an unreachable daemon raises :class:`SandboxUnavailable`.

    Code in the sandbox can take over its daemon's port, so every answer is read as untrusted:
    at most the bytes the request can legitimately bring back (from ``output_cap`` and
    ``max_file_bytes``, the limits the daemon was started with), and within a deadline (a
    command's time limit plus ``answer_margin`` seconds, ``transfer_timeout`` for file transfers,
    ``health_timeout`` for the health check). Anything else raises :class:`SandboxUnavailable`.
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
        answer_margin: float = 30.0,
        transfer_timeout: float = 120.0,
        output_cap: int = 1024 * 1024,
        max_file_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.handle = handle
        self.environment: dict[str, str] = {}
        self.on_use: Callable[[], Awaitable[None]] | None = None
        self._default_timeout = default_timeout
        self._max_timeout = max_timeout
        self._busy_retries = busy_retries
        self._connect_timeout = connect_timeout
        self._health_timeout = health_timeout
        self._answer_margin = answer_margin
        self._transfer_timeout = transfer_timeout
        self._output_cap = output_cap
        self._max_file_bytes = max_file_bytes
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

    async def _request(
        self, method: str, path: str, *, deadline: float, cap: int, **options: Any
    ) -> tuple[int, str, bytes]:
        """The status, ``Retry-After`` and body of one request, the body read up to ``cap`` bytes."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout)
        try:
            async with asyncio.timeout(deadline):
                async with self._http().request(method, path, timeout=timeout, **options) as response:
                    if response.content_length is not None and response.content_length > cap:
                        raise SandboxUnavailable(self._oversized(path, cap))
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in response.content.iter_any():
                        size += len(chunk)
                        if size > cap:
                            raise SandboxUnavailable(self._oversized(path, cap))
                        chunks.append(chunk)
                    return response.status, response.headers.get("Retry-After", "1"), b"".join(chunks)
        except TimeoutError as error:
            raise SandboxUnavailable(f"sandbox {self.id}: {path} got no whole answer within {deadline:g} s") from error
        except aiohttp.ClientError as error:
            raise SandboxUnavailable(f"sandbox {self.id}: {path} failed: {error!r}") from error

    def _oversized(self, path: str, cap: int) -> str:
        return f"sandbox {self.id}: {path} answered more than the {cap} bytes this request can bring back"

    def _parse(self, path: str, raw: bytes, shape: type[_Answer]) -> _Answer:
        """The answer read as the protocol's ``shape``; :class:`SandboxUnavailable` for anything else."""
        try:
            return shape.model_validate_json(raw)
        except ValidationError as error:
            if any(detail["type"] == "json_invalid" for detail in error.errors()):
                what = "what is not JSON"
            else:
                what = f"what is not its protocol's answer ({error.error_count()} fields wrong)"
            raise SandboxUnavailable(f"sandbox {self.id}: {path} answered {what}") from None

    def _files(self, path: str, answer: _FilesAnswer, asked: list[str]) -> list[_FileAnswer]:
        if [result.path for result in answer.results] != asked:
            raise SandboxUnavailable(f"sandbox {self.id}: {path} answered for other files than it was asked")
        return answer.results

    async def _post(
        self, path: str, body: Mapping[str, Any], shape: type[_Answer], *, deadline: float, cap: int
    ) -> _Answer:
        for attempt in range(self._busy_retries + 1):
            status, retry_after, raw = await self._request("POST", path, deadline=deadline, cap=cap, json=body)
            if status == 429 and attempt < self._busy_retries:
                await asyncio.sleep(min(0.05 * 2**attempt, _seconds(retry_after)))
                continue
            if status == 429:
                raise SandboxBusy(f"sandbox {self.id}: {_error_text(raw)}")
            if status != 200:
                raise SandboxUnavailable(f"sandbox {self.id}: {path} answered {status}: {_error_text(raw)}")
            return self._parse(path, raw, shape)
        raise AssertionError("unreachable")

    async def health(self) -> dict[str, Any]:
        """The daemon's health document; :class:`SandboxUnavailable` if it does not answer ok."""
        status, _, raw = await self._request("GET", protocol.HEALTH, deadline=self._health_timeout, cap=_HEALTH_CAP)
        if status != 200:
            raise SandboxUnavailable(f"sandbox {self.id}: health answered {status}: {_error_text(raw)}")
        return self._parse(protocol.HEALTH, raw, _HealthAnswer).model_dump()

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
        cap = _answer_cap(self._output_cap if output_cap is None else output_cap)
        answer = await self._post(protocol.EXEC, body, _ExecAnswer, deadline=limit + self._answer_margin, cap=cap)
        if self.on_use is not None:
            await self.on_use()
        return CommandResult(
            exit_code=answer.exit_code,
            output=answer.output,
            truncated=answer.truncated,
            timed_out=answer.timed_out,
            duration_ms=answer.duration_ms,
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
        cap = sum(_per_file_cap(path, 0) for path, _ in files) + _OVERHEAD
        answer = await self._post(protocol.UPLOAD, body, _FilesAnswer, deadline=self._transfer_timeout, cap=cap)
        results = self._files(protocol.UPLOAD, answer, [path for path, _ in files])
        return [FileUploadResponse(path=item.path, error=item.error) for item in results]

    async def adownload_files(
        self, paths: list[str], *, max_file_bytes: int | None = None
    ) -> list[FileDownloadResponse]:
        """deepagents' download; a file over ``max_file_bytes`` (at most the backend's own
        limit) comes back with an error instead of its content."""
        limit = self._max_file_bytes if max_file_bytes is None else min(max_file_bytes, self._max_file_bytes)
        body = {"paths": paths, "max_file_bytes": limit}
        cap = sum(_per_file_cap(path, limit) for path in paths) + _OVERHEAD
        answer = await self._post(protocol.DOWNLOAD, body, _FilesAnswer, deadline=self._transfer_timeout, cap=cap)
        found = []
        for item in self._files(protocol.DOWNLOAD, answer, paths):
            try:
                content = None if item.content_b64 is None else base64.b64decode(item.content_b64, validate=True)
            except binascii.Error:
                raise SandboxUnavailable(f"sandbox {self.id}: the content of {item.path} is not base64") from None
            found.append(FileDownloadResponse(path=item.path, content=content, error=item.error))
        return found

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


_OVERHEAD = 4096
_HEALTH_CAP = 64 * 1024


def _answer_cap(output_cap: int) -> int:
    # The daemon's JSON escapes each byte of output into at most six (a control byte or an
    # invalid one, read as U+FFFD, becomes \uXXXX).
    return 6 * output_cap + _OVERHEAD


def _per_file_cap(path: str, max_file_bytes: int) -> int:
    """The most one file's entry in a transfer's answer can take: its content in base64, its
    path echoed back and an error message."""
    return 4 * -(-max_file_bytes // 3) + 2 * len(json.dumps(path)) + _OVERHEAD


def _seconds(retry_after: str) -> float:
    try:
        return float(retry_after)
    except ValueError:
        return 1.0


def _error_text(raw: bytes) -> str:
    try:
        return str(json.loads(raw)["error"])
    except (ValueError, KeyError, TypeError):
        return raw.decode(errors="replace")[:200]
