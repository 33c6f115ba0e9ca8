from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
from collections.abc import Iterator

import httpx
import pytest
import structlog
from fastapi import FastAPI

from drydock.config import HttpSettings, LogFormat, LogSettings
from drydock.embedded import free_port
from drydock.http import serve
from drydock.telemetry import bind_run, configure_logging
from drydock.telemetry.logging import BUS_LOGGER, SERVER_LOGGER
from tests.waiting import eventually


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    stream = io.StringIO()
    configure_logging(LogSettings(level="INFO"), LogFormat.JSON, stream)
    yield stream
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)
    structlog.reset_defaults()


class TestJsonLogs:
    def test_lines_carry_thread_and_run_ids(self, json_logs: io.StringIO) -> None:
        with bind_run(thread_id="t-1", run_id="r-1"):
            structlog.get_logger("drydock.test").info("model call", step=3)
            logging.getLogger("some.library").warning("plain stdlib line")
        structlog.get_logger("drydock.test").info("outside")
        lines = [json.loads(line) for line in json_logs.getvalue().splitlines()]
        inside, stdlib, outside = lines
        assert inside["event"] == "model call"
        assert inside["thread_id"] == "t-1"
        assert inside["run_id"] == "r-1"
        assert inside["step"] == 3
        assert inside["level"] == "info"
        assert stdlib["thread_id"] == "t-1"
        assert stdlib["logger"] == "some.library"
        assert "thread_id" not in outside

    def test_level_filters(self, json_logs: io.StringIO) -> None:
        structlog.get_logger("drydock.test").debug("hidden")
        assert json_logs.getvalue() == ""

    def test_a_logger_s_own_level_is_honoured(self, json_logs: io.StringIO) -> None:
        verbose = logging.getLogger("drydock.verbose")
        verbose.setLevel(logging.DEBUG)
        try:
            structlog.get_logger("drydock.verbose").debug("shown", detail=1)
        finally:
            verbose.setLevel(logging.NOTSET)
        [line] = [json.loads(line) for line in json_logs.getvalue().splitlines()]
        assert line["event"] == "shown"
        assert line["detail"] == 1


@pytest.fixture
def console_logs() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    stream = io.StringIO()
    configure_logging(LogSettings(level="INFO"), LogFormat.CONSOLE, stream)
    yield stream
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)
    structlog.reset_defaults()


def _fail_with(payload: str) -> None:
    raise ValueError(f"bad payload of {len(payload)} characters")


class TestConsoleLogs:
    @pytest.mark.parametrize("source", ["structlog", "stdlib"])
    def test_a_traceback_shows_no_locals(self, console_logs: io.StringIO, source: str) -> None:
        payload = "secret-payload-" + "x" * 1_000_000
        try:
            _fail_with(payload)
        except ValueError:
            if source == "structlog":
                structlog.get_logger("drydock.test").exception("webhook failed")
            else:
                logging.getLogger("uvicorn.error").exception("Exception in ASGI application")
        written = console_logs.getvalue()
        assert "bad payload of 1000015 characters" in written
        assert "_fail_with" in written
        assert "secret-payload" not in written
        assert len(written) < 5_000


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    yield
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)
    structlog.reset_defaults()


class TestColours:
    @pytest.mark.usefixtures("restore_logging")
    def test_no_colours_when_the_output_is_not_a_terminal(self) -> None:
        for stream, coloured in ((io.StringIO(), False), (_Terminal(), True)):
            configure_logging(LogSettings(level="INFO"), LogFormat.CONSOLE, stream)
            structlog.get_logger("drydock.test").warning("something happened", detail=1)
            written = stream.getvalue()
            assert "something happened" in written
            assert ("\x1b[" in written) is coloured, written


async def _one_request() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200))
    async with httpx.AsyncClient(transport=transport) as client:
        await client.post("http://127.0.0.1:9/exec")


class TestHttpxRequestLines:
    @pytest.mark.usefixtures("restore_logging")
    async def test_request_lines_are_debug(self) -> None:
        stream = io.StringIO()
        configure_logging(LogSettings(level="INFO"), LogFormat.JSON, stream)
        await _one_request()
        assert "HTTP Request" not in stream.getvalue()
        configure_logging(LogSettings(level="DEBUG"), LogFormat.JSON, stream)
        await _one_request()
        (line,) = [json.loads(line) for line in stream.getvalue().splitlines() if "HTTP Request" in line]
        assert line["level"] == "debug"
        assert line["logger"] == "httpx"


class TestFaststreamTaskLines:
    @pytest.mark.usefixtures("restore_logging")
    def test_a_subscriber_tasks_end_is_debug(self) -> None:
        stream = io.StringIO()
        configure_logging(LogSettings(level="INFO"), LogFormat.JSON, stream)
        bus = logging.getLogger(BUS_LOGGER)
        bus.info("callback for Task-7 is being executed...")
        bus.warning("a subscriber's warning")
        assert [json.loads(line)["event"] for line in stream.getvalue().splitlines()] == ["a subscriber's warning"]
        configure_logging(LogSettings(level="DEBUG"), LogFormat.JSON, stream)
        bus.info("callback for Task-8 is being executed...")
        (line,) = [json.loads(line) for line in stream.getvalue().splitlines() if "Task-8" in line]
        assert line["level"] == "debug"


class TestServerLines:
    @pytest.mark.parametrize("level", ["INFO", "DEBUG"])
    @pytest.mark.usefixtures("restore_logging")
    async def test_the_servers_start_and_stop_are_debug(self, level: str) -> None:
        stream = io.StringIO()
        configure_logging(LogSettings(level=level), LogFormat.JSON, stream)
        http = HttpSettings(host="127.0.0.1", port=free_port(), metrics_port=free_port())
        serving = asyncio.create_task(serve(FastAPI(), http))
        async with httpx.AsyncClient(trust_env=False) as client:

            async def answered() -> bool:
                try:
                    return (await client.get(f"http://127.0.0.1:{http.metrics_port}/metrics")).status_code == 200
                except httpx.ConnectError:
                    return False

            await eventually(answered, what="the metrics server's answer")
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        lines = [json.loads(line) for line in stream.getvalue().splitlines()]
        server = [(line["level"], line["event"]) for line in lines if line["logger"] == SERVER_LOGGER]
        if level == "INFO":
            assert server == []
        else:
            # Both servers, the app's and the metrics one, said it.
            assert server.count(("debug", "Shutting down")) == 2
            assert {level for level, _ in server} == {"debug"}
