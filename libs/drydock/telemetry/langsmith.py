"""LangSmith's bookkeeping for traced functions, kept on the event loop when nothing is traced.

LangChain's agent factory wraps every middleware's ``awrap_model_call`` and ``awrap_tool_call``
in LangSmith's ``traceable``, whose async wrapper runs its setup and teardown through
``run_in_executor`` and then the wrapped call in a task of its own, even with tracing off. With
the coder's middleware that is about forty thread hand-offs and twenty tasks per agent step, a
large share of a step's orchestration time on a busy worker. LangSmith's documented runtime
override runs that bookkeeping inline instead. It is installed only when tracing is off at
start-up (``LANGSMITH_TRACING`` unset): with tracing on, setting up a traced run may block, so
the default thread hand-off stays.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from typing import Any

import langsmith
from langsmith.utils import tracing_is_enabled

DefaultToThread = Callable[..., Awaitable[Any]]


async def _inline(
    default: DefaultToThread, ctx: contextvars.Context, func: Callable[..., Any], /, *args: Any, **kwargs: Any
) -> Any:
    return ctx.run(func, *args, **kwargs)


def keep_untraced_bookkeeping_inline() -> bool:
    """Install the override for this process unless tracing is on; whether it was installed."""
    if tracing_is_enabled():
        return False
    langsmith.set_runtime_overrides(aio_to_thread=_inline)
    return True
