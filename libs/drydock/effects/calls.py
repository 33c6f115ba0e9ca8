"""Where an effect stands in the run: the tool call's position, bound by the tool-call middleware
around each call and read by :class:`drydock.effects.Effects` to key the ledger.

The position is the graph step that runs the tool call and the call's index in the model's
message (``step-12.0``), not the model's tool call id. A step lost with its checkpoint (the store
failed, the worker died) is run again from the checkpoint before it: the model is asked again and
names its calls with new ids, but the step and the index come out the same. A later step of the
run, or a later run of the thread (steps continue from the thread's checkpoint), has a larger
step, so two legitimate successive writes never share a position. A call made inside a subagent
is placed under the call that started the subagent (``step-12.0/step-3.1``), since the
subagent's steps count from zero each time it runs.

Positions are unique only as long as the thread's checkpoints are kept (the worker sets no
checkpoint TTL and nothing deletes a thread's checkpoints): whatever came to expire or delete
them must drop the thread's effect ledger (``Keys.effect``) with them, or a new run would meet
the old positions.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from langchain_core.messages import AIMessage

_CALL: ContextVar[str | None] = ContextVar("drydock_tool_call", default=None)


def call_position(step: object, messages: Sequence[Any], call_id: str) -> str | None:
    """``step-{step}.{index}`` for the call ``call_id`` of the last model message that made it;
    ``None`` when the step or the call cannot be placed (a tool run outside a graph)."""
    if not isinstance(step, int):
        return None
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            for index, call in enumerate(message.tool_calls):
                if call.get("id") == call_id:
                    return f"step-{step}.{index}"
    return None


def position_in(config: Mapping[str, Any] | None, state: object, call_id: str) -> str:
    """The position of the tool call ``call_id`` given its node's config and the agent's state;
    the call id itself where it cannot be placed."""
    metadata = (config or {}).get("metadata") or {}
    messages = state.get("messages", []) if isinstance(state, Mapping) else getattr(state, "messages", [])
    return call_position(metadata.get("langgraph_step"), messages, call_id) or call_id


@contextlib.contextmanager
def bound_call(position: str) -> Iterator[None]:
    """Effects made inside the block belong to the tool call at ``position``; inside another
    bound call (a subagent's tool call) the position is placed under the outer one."""
    outer = _CALL.get()
    token = _CALL.set(f"{outer}/{position}" if outer else position)
    try:
        yield
    finally:
        _CALL.reset(token)


def current_call() -> str:
    """The bound tool call's position; outside a model's tool call (a tool invoked directly) a
    fresh id, since there is no checkpointed step that could be replayed."""
    return _CALL.get() or f"direct-{uuid.uuid4().hex}"
