"""Middleware 6: update the source channel's status indicator at model-call boundaries.

*Working* before the run's first model call (and again whenever another status was shown),
*failed* when a model call fails for good (after the client's retries and any fallback), and at
the end of the run *finished*, *stopped at the step limit*, or *failed* when the sandbox circuit
breaker stopped it. Indicators are best effort: a channel error is logged, never fails the run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime

from drydock.channels.run_status import RunStatus
from drydock.middleware.outcome import StopReason, stop_reason
from drydock.middleware.protocols import StatusReporter

log = structlog.get_logger(__name__)

_FINAL = {
    None: RunStatus.FINISHED,
    StopReason.STEP_LIMIT: RunStatus.STEP_LIMIT,
    StopReason.SANDBOX_FAILURES: RunStatus.FAILED,
    StopReason.BUDGET: RunStatus.STEP_LIMIT,
}


class StatusIndicators(AgentMiddleware[AgentState[Any], Any, Any]):
    """Shows the run's status through ``reporter``; does nothing when it is None."""

    def __init__(self, reporter: StatusReporter | None, thread_id: str) -> None:
        super().__init__()
        self.reporter = reporter
        self.thread_id = thread_id
        self._shown: RunStatus | None = None

    async def _show(self, status: RunStatus, detail: str = "") -> None:
        if self.reporter is None:
            return
        try:
            await self.reporter.show(status, detail)
        except Exception as error:
            log.warning("status indicator failed", thread_id=self.thread_id, status=status.value, error=repr(error))
        self._shown = status

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        if self._shown is not RunStatus.WORKING:
            await self._show(RunStatus.WORKING)
        try:
            return await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as error:
            await self._show(RunStatus.FAILED, f"the model call failed: {type(error).__name__}")
            raise

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        await self._show(_FINAL[stop_reason(state["messages"])])
        return None
