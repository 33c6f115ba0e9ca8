"""How a run ended when the agent did not end it: the middleware that stops a run (the step
limit, the sandbox circuit breaker) ends it with a stop message, an ``AIMessage`` marked in its
``response_metadata`` (never sent to the provider). The status indicator and the step-limit
notice read the mark from the last message, so the outcome is checkpointed with the run."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from langchain_core.messages import AIMessage, BaseMessage

STOP_REASON_KEY = "drydock_stop_reason"


class StopReason(StrEnum):
    STEP_LIMIT = "step_limit"
    SANDBOX_FAILURES = "sandbox_failures"
    BUDGET = "budget"
    """A spend limit: the stop message's ``response_metadata`` carries it (:data:`BUDGET_KEY`)."""


BUDGET_KEY = "drydock_budget"


def stop_message(reason: StopReason, text: str, **metadata: str) -> AIMessage:
    """The run's last message when middleware stops it for ``reason``."""
    return AIMessage(content=text, response_metadata={STOP_REASON_KEY: reason.value, **metadata})


def stop_reason(messages: Sequence[BaseMessage]) -> StopReason | None:
    """Why the run stopped, when its last message is a stop message; None when the agent ended it."""
    if not messages or not isinstance(messages[-1], AIMessage):
        return None
    value = messages[-1].response_metadata.get(STOP_REASON_KEY)
    return StopReason(value) if value is not None else None
