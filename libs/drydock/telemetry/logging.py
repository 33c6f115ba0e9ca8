"""Structured logging: JSON in production, readable in development, with thread and run ids.

Code binds ``thread_id`` and ``run_id`` once with :func:`bind_run`; every log line inside
that context carries them, including lines from the standard library's ``logging``.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
from collections.abc import Iterator
from typing import Any, TextIO

import structlog

from drydock.config import LogFormat, LogSettings

BUS_LOGGER = "drydock.bus.broker"
"""FastStream's logger in every service's broker."""
SERVER_LOGGER = "uvicorn.error"
"""uvicorn's logger: its server's start and stop, and the errors of the requests it serves."""
INFO_AT_DEBUG = ("httpx", BUS_LOGGER, SERVER_LOGGER)
"""Loggers whose INFO lines are written at DEBUG: httpx logs each request and FastStream each
subscriber task that ends (a line per task at every stop); one line per sandbox exec, model call
or consumer drowns the story. uvicorn says each server's start and stop without naming it, twice
where the metrics server runs beside the app, and ``drydock serve`` prints the addresses itself."""


def configure_logging(settings: LogSettings, log_format: LogFormat, stream: TextIO | None = None) -> None:
    """Route structlog and the standard library's logging through one renderer to ``stream`` (stderr)."""
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    renderer: structlog.types.Processor
    if log_format is LogFormat.JSON:
        shared.append(structlog.processors.format_exc_info)
        renderer = structlog.processors.JSONRenderer()
    else:
        # Plain tracebacks: the default (rich, with every frame's locals) printed whole webhook
        # payloads and took seconds per error on the event loop.
        output = stream or sys.stderr
        renderer = structlog.dev.ConsoleRenderer(
            colors=output.isatty(), exception_formatter=structlog.dev.plain_traceback
        )

    structlog.configure(
        # Below the level a line is dropped before the processors run (its time stamp alone cost
        # more than the rest of an ingress's log call), as logging itself would drop it after them.
        processors=[structlog.stdlib.filter_by_level, *shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.level)
    for noisy in ("uvicorn.access",):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    for name in INFO_AT_DEBUG:
        chatty = logging.getLogger(name)
        chatty.filters[:] = [f for f in chatty.filters if not isinstance(f, _InfoAtDebug)]
        chatty.addFilter(_InfoAtDebug())


class _InfoAtDebug(logging.Filter):
    """A line of :data:`INFO_AT_DEBUG` at INFO is written at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.INFO:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True


_GAPS_SUMMARIZED: contextvars.ContextVar[bool] = contextvars.ContextVar("gaps_summarized", default=False)


def summarize_configuration_gaps() -> None:
    """Mark that what is not configured was already reported once (``drydock dev``'s summary):
    services started from this context log their own notices of it at DEBUG."""
    _GAPS_SUMMARIZED.set(True)


def configuration_gap(logger: structlog.stdlib.BoundLogger, level: int, event: str, **values: Any) -> None:
    """Log that something is not configured, at ``level`` unless already summarized."""
    logger.log(logging.DEBUG if _GAPS_SUMMARIZED.get() else level, event, **values)


@contextlib.contextmanager
def bind_run(*, thread_id: str, run_id: str | None = None) -> Iterator[None]:
    """Attach the thread (and run) id to every log line written inside the block."""
    values = {"thread_id": thread_id} | ({"run_id": run_id} if run_id else {})
    with structlog.contextvars.bound_contextvars(**values):
        yield
