"""The tool call an effect belongs to: bound by the tool-call middleware around each call, read
by :class:`drydock.effects.Effects` to key the ledger."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from contextvars import ContextVar

_CALL: ContextVar[str | None] = ContextVar("drydock_tool_call", default=None)


@contextlib.contextmanager
def bound_call(call_id: str) -> Iterator[None]:
    """Effects made inside the block belong to the tool call ``call_id``."""
    token = _CALL.set(call_id)
    try:
        yield
    finally:
        _CALL.reset(token)


def current_call() -> str:
    """The bound tool call's id; outside a model's tool call (a tool invoked directly) a fresh id,
    since there is no checkpointed call that could be replayed."""
    return _CALL.get() or f"direct-{uuid.uuid4().hex}"
