"""The daemon's routes and limits: authentication first, then one handler per endpoint."""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drydock.sandbox.daemon import protocol
from drydock.sandbox.daemon.auth import require_bearer
from drydock.sandbox.daemon.confinement import Confinement
from drydock.sandbox.daemon.execution import ExecQueueFull, ExecSlots, ProcessGroups, run_command
from drydock.sandbox.daemon.files import download, upload
from drydock.sandbox.daemon.http11 import BadRequest, HttpError, Request, Response, json_response
from drydock.sandbox.daemon.trace_context import with_trace_context

log = logging.getLogger("drydock.sandbox.daemon")


@dataclass(frozen=True)
class DaemonConfig:
    """What the daemon serves and its limits. ``token`` is never put in a command's environment."""

    token: str = field(repr=False)
    workspace: Path
    extra_roots: tuple[Path, ...] = ()
    shell: str = "/bin/sh"
    max_concurrent_execs: int = 8
    max_queued_execs: int = 32
    default_timeout: float = 120.0
    max_timeout: float = 3600.0
    output_cap: int = 1024 * 1024
    max_file_bytes: int = 64 * 1024 * 1024
    max_request_bytes: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        if not self.token:
            raise ValueError("the daemon needs a non-empty token")
        if self.max_concurrent_execs < 1 or self.max_queued_execs < 0:
            raise ValueError("max_concurrent_execs must be >= 1 and max_queued_execs >= 0")
        if not 0 < self.default_timeout <= self.max_timeout:
            raise ValueError("default_timeout must be positive and at most max_timeout")
        if self.output_cap < 0 or self.max_file_bytes < 0:
            raise ValueError("output_cap and max_file_bytes must not be negative")


def body_field(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...], *, required: bool = True) -> Any:
    """``body[name]`` if it has type ``kind`` (a JSON boolean is never a number here);
    ``None`` if it is absent and not required."""
    if body.get(name) is None:
        if required:
            raise BadRequest(f"the field {name!r} is required")
        return None
    value = body[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise BadRequest(f"the field {name!r} has the wrong type")
    return value


class Daemon:
    """The request handler of one sandbox."""

    def __init__(self, config: DaemonConfig) -> None:
        self.config = config
        self.confinement = Confinement(config.workspace, config.extra_roots)
        self.slots = ExecSlots(config.max_concurrent_execs, config.max_queued_execs)
        self.groups = ProcessGroups()
        self.started = time.monotonic()
        self._token = config.token.encode()
        self._routes = {
            ("GET", protocol.HEALTH): self.health,
            ("POST", protocol.EXEC): self.execute,
            ("POST", protocol.UPLOAD): self.upload,
            ("POST", protocol.DOWNLOAD): self.download,
        }

    async def __call__(self, request: Request) -> Response:
        # Authentication comes first: without the token a client learns nothing, not even
        # whether a route exists or its body was valid.
        require_bearer(request.headers, self._token)
        handler = self._routes.get((request.method, request.path))
        if handler is None:
            allowed = [method for method, path in self._routes if path == request.path]
            if allowed:
                raise HttpError(405, f"{request.method} is not allowed here", headers={"Allow": ", ".join(allowed)})
            raise HttpError(404, f"no such endpoint: {request.path}")
        try:
            return await handler(request)
        except HttpError:
            raise
        except Exception as error:
            log.exception("request %s %s failed", request.method, request.path)
            raise HttpError(500, f"internal error: {type(error).__name__}: {error}") from error

    async def health(self, request: Request) -> Response:
        return json_response(
            {
                "status": "ok",
                "workspace": str(self.confinement.workspace),
                "running_execs": self.slots.running,
                "uptime_s": round(time.monotonic() - self.started, 3),
            }
        )

    def _cwd(self, raw: str | None) -> Path:
        cwd = self.confinement.workspace if raw is None else self.confinement.workspace / raw
        if not cwd.is_dir():
            raise BadRequest(f"cwd {raw!r} is not a directory")
        return cwd

    def _env(self, raw: dict[str, Any] | None) -> dict[str, str]:
        env = dict(os.environ)
        for name, value in (raw or {}).items():
            if not name or "=" in name or "\x00" in name or not isinstance(value, str) or "\x00" in value:
                raise BadRequest(f"env entry {name!r} must be a name without '=' and a string value")
            env[name] = value
        return env

    def _timeout(self, raw: float | None) -> float:
        if raw is None:
            return self.config.default_timeout
        if not 0 < raw <= self.config.max_timeout:
            raise BadRequest(f"timeout must be in (0, {self.config.max_timeout:g}] seconds, not {raw}")
        return float(raw)

    def _output_cap(self, raw: int | None) -> int:
        if raw is None:
            return self.config.output_cap
        if not 0 <= raw <= self.config.output_cap:
            raise BadRequest(f"output_cap must be in [0, {self.config.output_cap}] bytes, not {raw}")
        return raw

    async def execute(self, request: Request) -> Response:
        body = request.json()
        command = body_field(body, "command", str)
        if not command.strip() or "\x00" in command:
            raise BadRequest("command must be a non-empty string without NUL bytes")
        cwd = self._cwd(body_field(body, "cwd", str, required=False))
        env = with_trace_context(self._env(body_field(body, "env", dict, required=False)), request.headers)
        timeout = self._timeout(body_field(body, "timeout", (int, float), required=False))
        output_cap = self._output_cap(body_field(body, "output_cap", int, required=False))
        try:
            async with self.slots.slot():
                result = await run_command(
                    command,
                    shell=self.config.shell,
                    cwd=cwd,
                    env=env,
                    time_limit=timeout,
                    output_cap=output_cap,
                    groups=self.groups,
                )
        except ExecQueueFull as full:
            raise HttpError(429, f"too many commands: {full}", headers={"Retry-After": "1"}) from None
        return json_response(
            {
                "exit_code": result.exit_code,
                "output": result.output,
                "truncated": result.truncated,
                "timed_out": result.timed_out,
                "duration_ms": round(result.duration_ms, 3),
            }
        )

    async def upload(self, request: Request) -> Response:
        entries = body_field(request.json(), "files", list)
        files: list[tuple[str, bytes]] = []
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise BadRequest(f"files[{index}] must be an object with path and content_b64")
            path = body_field(entry, "path", str)
            try:
                content = base64.b64decode(body_field(entry, "content_b64", str), validate=True)
            except binascii.Error:
                raise BadRequest(f"files[{index}].content_b64 is not base64") from None
            files.append((path, content))
        errors = await asyncio.to_thread(upload, self.confinement, files)
        return json_response(
            {"results": [{"path": path, "error": error} for (path, _), error in zip(files, errors, strict=True)]}
        )

    async def download(self, request: Request) -> Response:
        body = request.json()
        paths = body_field(body, "paths", list)
        if not all(isinstance(path, str) for path in paths):
            raise BadRequest("paths must be a list of strings")
        asked = body_field(body, "max_file_bytes", int, required=False)
        if asked is not None and asked < 0:
            raise BadRequest(f"max_file_bytes must not be negative, not {asked}")
        limit = self.config.max_file_bytes if asked is None else min(asked, self.config.max_file_bytes)
        results = await asyncio.to_thread(download, self.confinement, paths, max_file_bytes=limit)
        return json_response(
            {
                "results": [
                    {
                        "path": result.path,
                        "content_b64": None if result.content is None else base64.b64encode(result.content).decode(),
                        "error": result.error,
                    }
                    for result in results
                ]
            }
        )

    def kill_commands(self) -> None:
        """Kill every running command's process group (at shutdown)."""
        self.groups.kill_all()
