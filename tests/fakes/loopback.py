"""Serving a test double's ASGI app with uvicorn on a free loopback port, inside the test's
event loop: ``async with LoopbackServer(app) as server: server.base_url``. A fake service
subclasses it and passes its app. With ``lifespan``
the app's start-up and shutdown run too, as in production."""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
from collections.abc import Iterator
from types import TracebackType
from typing import Literal, Self

import uvicorn
from fastapi import FastAPI

from drydock.config import HttpSettings
from drydock.http import server_config


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class LoopbackServer:
    def __init__(
        self, app: FastAPI, *, lifespan: bool = False, http: HttpSettings | None = None, host: str = "127.0.0.1"
    ) -> None:
        """``http``: serve as the services do by those settings (read deadline, keep-alive); ``host``:
        the address to listen on (loopback, or the address a cluster's pods reach this machine at)."""
        self._app = app
        self._host = host
        self._lifespan = lifespan
        self._http = http
        self._socket: socket.socket | None = None
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def base_url(self) -> str:
        if self._socket is None:
            raise RuntimeError("the server is not running; use it as an async context manager")
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    async def __aenter__(self) -> Self:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it; without it a pre-bound socket answers small
        # requests only after the peer's delayed ACK (~40 ms per request on loopback).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((self._host, 0))
        self._socket = sock
        lifespan: Literal["on", "off"] = "on" if self._lifespan else "off"
        if self._http is not None:
            config = server_config(self._app, self._http, lifespan=lifespan, access_log=False)
        else:
            config = uvicorn.Config(
                self._app,
                log_config=None,
                lifespan=lifespan,
                access_log=False,
                # As the services do (DRYDOCK_HTTP_KEEP_ALIVE): longer than httpx's 5 s pool expiry,
                # so a client never reuses a connection this server is just closing.
                timeout_keep_alive=math.ceil(HttpSettings().keep_alive.total_seconds()),
            )
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise RuntimeError("the server stopped before it started")
            await asyncio.sleep(0.005)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
        if self._socket is not None:
            self._socket.close()
        self._server = self._task = None
        self._socket = None
