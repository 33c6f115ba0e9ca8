"""Middleware 8: when a run stopped at the step limit, tell the conversation it came from, so
nobody waits for an answer that is not coming. Best effort: a channel error is logged."""

from __future__ import annotations

from typing import Any

import structlog
from langchain.agents.middleware import AgentMiddleware, AgentState
from langgraph.runtime import Runtime

from drydock.middleware.outcome import StopReason, stop_reason
from drydock.middleware.protocols import SourceNotifier

log = structlog.get_logger(__name__)

STEP_LIMIT_NOTICE = (
    "I reached the step limit for this run and stopped before finishing. "
    "Reply here to let me continue where I left off."
)


class StepLimitNotice(AgentMiddleware[AgentState[Any], Any, Any]):
    """Posts :data:`STEP_LIMIT_NOTICE` through ``notifier`` after a run that hit the step limit."""

    def __init__(self, notifier: SourceNotifier | None, thread_id: str, *, text: str = STEP_LIMIT_NOTICE) -> None:
        super().__init__()
        self.notifier = notifier
        self.thread_id = thread_id
        self.text = text

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        if self.notifier is None or stop_reason(state["messages"]) is not StopReason.STEP_LIMIT:
            return None
        try:
            await self.notifier.notify(self.text)
        except Exception as error:
            log.warning("step limit notice failed", thread_id=self.thread_id, error=repr(error))
        return None
