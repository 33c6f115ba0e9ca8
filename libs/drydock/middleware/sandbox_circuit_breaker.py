"""Middleware 9: stop the run after repeated sandbox failures instead of letting the model
retry against a sandbox that is gone.

A tool call that fails because the sandbox is unreachable (``failure_types``) counts one
failure in the thread's shared counter (the one the sandbox lifecycle manager also counts
failed provisioning in); a later successful call of a sandbox tool resets it. At each model
call, a count at ``threshold`` trips the breaker: the stop message
(:data:`~drydock.middleware.outcome.StopReason.SANDBOX_FAILURES`) stands in for the model's
reply, so the run ends, and the conversation it came from gets a notice (once: a run's
subagent shares its breaker instance, and both stop). The next run starts with the count the
lifecycle manager left (it resets it when it provides a sandbox again).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from langchain.agents.middleware import AgentMiddleware, AgentState, ModelCallResult, ModelRequest, ModelResponse
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from drydock.middleware.outcome import StopReason, stop_message
from drydock.middleware.protocols import SandboxFailureCounter, SourceNotifier
from drydock.sandbox.errors import SandboxNotFound, SandboxUnavailable

log = structlog.get_logger(__name__)

SANDBOX_TOOLS = frozenset({"execute", "ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep"})
"""The framework's tools that run in the sandbox (deepagents' filesystem and shell tools)."""

SANDBOX_FAILURE_NOTICE = (
    "I stopped because my sandbox failed {count} times in a row, so I cannot work on this right now. "
    "Reply here to try again; if it keeps happening, an administrator should check the sandbox provider."
)


class SandboxCircuitBreaker(AgentMiddleware[AgentState[Any], Any, Any]):
    """Counts sandbox failures of tool calls and ends the run at ``threshold``."""

    def __init__(
        self,
        failures: SandboxFailureCounter,
        thread_id: str,
        *,
        notifier: SourceNotifier | None = None,
        threshold: int = 3,
        failure_types: tuple[type[BaseException], ...] = (SandboxUnavailable, SandboxNotFound),
        sandbox_tools: frozenset[str] = SANDBOX_TOOLS,
    ) -> None:
        super().__init__()
        if threshold < 1:
            raise ValueError(f"threshold must be at least 1, not {threshold}")
        self.failures = failures
        self.thread_id = thread_id
        self.notifier = notifier
        self.threshold = threshold
        self.failure_types = failure_types
        self.sandbox_tools = sandbox_tools
        self._counted = False
        self._count: int | None = None
        self._notified = False

    async def _current(self) -> int:
        # Read once per run: while the run holds the thread's lease, only this middleware
        # changes the count (the lifecycle manager counts before the run starts).
        if self._count is None:
            self._count = await self.failures.count(self.thread_id)
        return self._count

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        count = await self._current()
        if count < self.threshold:
            return await handler(request)
        text = SANDBOX_FAILURE_NOTICE.format(count=count)
        log.warning("sandbox circuit breaker tripped", thread_id=self.thread_id, failures=count)
        if self.notifier is not None and not self._notified:
            self._notified = True
            try:
                await self.notifier.notify(text)
            except Exception as error:
                log.warning("sandbox failure notice failed", thread_id=self.thread_id, error=repr(error))
        return stop_message(StopReason.SANDBOX_FAILURES, text)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        try:
            result = await handler(request)
        except self.failure_types:
            count = await self.failures.record(self.thread_id)
            # Parallel tool calls record concurrently; their answers may arrive out of order.
            self._count = max(count, self._count or 0)
            self._counted = True
            log.warning("sandbox failure", thread_id=self.thread_id, tool=request.tool_call["name"], failures=count)
            raise
        if self._counted and request.tool_call["name"] in self.sandbox_tools:
            await self.failures.reset(self.thread_id)
            self._counted = False
            self._count = 0
        return result
