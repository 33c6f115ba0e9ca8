"""Which subagents each role has, decided per role.

- **coder**: one, the framework's general-purpose subagent behind ``task``, built here instead
  of by ``create_deep_agent`` so that it runs inside the coder's stack: the same eleven steps
  in the same order, spending the run's one step budget (a ``task`` call's model calls count
  against the run's step limit) and tripping the run's one circuit breaker (the same
  instance: failures in the subagent stop the agent too). The conversation stays with the
  agent that called ``task``: the subagent's inbox injection, status indicator and step-limit
  notice are bound to nothing (the agent reads the inbox, shows the status and sends the
  notice). Around the stack it gets what the framework gives its general-purpose subagent:
  file and shell tools, summarization, patching of dangling tool calls and prompt caching,
  with the last slot taken by the :class:`~drydock.middleware.provider_edge.ProviderEdge`.
  It has no ``write_todos``: the plan is the calling agent's. Its graph is compiled at the
  run's first ``task`` call (:class:`BuiltAtFirstCall`), not with the coder's: most runs never
  call it, and compiling it was a third of the time from a run's start to its first model call.
- **reviewer** and **analyzer**: none. A subagent would be a second agent to keep read-only
  and inside a lean stack for work the role does in a few reads; :class:`NoSubagents` takes
  the framework's subagent slot, so they have no ``task`` tool.

``tests/graphs/test_roles.py`` pins each role's tools and whole middleware stack, its
subagent's included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deepagents.graph import DeepAgentState
from deepagents.middleware._prompt_caching import append_prompt_caching_middleware
from deepagents.middleware.filesystem import FilesystemMiddleware
from deepagents.middleware.patch_tool_calls import PatchToolCallsMiddleware
from deepagents.middleware.subagents import GENERAL_PURPOSE_SUBAGENT, CompiledSubAgent, SubAgentMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.runnables import Runnable, RunnableConfig

from drydock.graphs.inputs import AgentInputs
from drydock.graphs.token_count import summarization
from drydock.middleware import (
    BackendInstructionFiles,
    SandboxCircuitBreaker,
    StepBudget,
    at_the_provider_edge,
    coder_middleware,
)

SUBAGENT_SLOT = SubAgentMiddleware.__name__


class NoSubagents(AgentMiddleware[AgentState[Any], Any, Any]):
    """Takes the framework's subagent slot by name: the role gets no ``task`` tool and no subagent."""

    @property
    def name(self) -> str:
        return SUBAGENT_SLOT


def coder_subagent_middleware(
    inputs: AgentInputs, budget: StepBudget, breaker: SandboxCircuitBreaker
) -> list[AgentMiddleware[Any, Any, Any]]:
    """The whole middleware list of the coder's general-purpose subagent, innermost last."""
    stack = coder_middleware(
        thread_id=inputs.scope.thread_id,
        inbox=None,
        sandbox_failures=inputs.sandbox_failures,
        status=None,
        notifier=None,
        instructions=BackendInstructionFiles(inputs.backend),
        repository_root=inputs.checkout.path if inputs.checkout is not None else "/",
        fallback=inputs.fallback,
        limits=inputs.limits,
        budget=budget,
        breaker=breaker,
        subagent=True,
        usage=inputs.usage,
        spend=inputs.spend,
        redactor=inputs.redactor,
    )
    *steps, edge = at_the_provider_edge(stack)
    middleware: list[AgentMiddleware[Any, Any, Any]] = [
        FilesystemMiddleware(backend=inputs.backend),
        summarization(inputs.model, inputs.backend),
        PatchToolCallsMiddleware(),
        *steps,
    ]
    append_prompt_caching_middleware(middleware)
    return [*middleware, edge]


class BuiltAtFirstCall(Runnable[Any, Any]):
    """A subagent's graph, compiled when the agent first calls it and kept for the run.

    The framework calls a compiled subagent only through ``ainvoke`` (``invoke`` for the sync
    ``task``), bound with its name by ``with_config``; both reach the compiled graph unchanged.
    """

    def __init__(self, build: Callable[[], Runnable[Any, Any]]) -> None:
        self._build = build
        self._built: Runnable[Any, Any] | None = None

    @property
    def built(self) -> Runnable[Any, Any]:
        """The compiled graph (compiled now if it was not yet)."""
        if self._built is None:
            self._built = self._build()
        return self._built

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self.built.invoke(input, config, **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await self.built.ainvoke(input, config, **kwargs)


def coder_subagent(inputs: AgentInputs, budget: StepBudget, breaker: SandboxCircuitBreaker) -> CompiledSubAgent:
    """The coder's general-purpose subagent, inside the coder's stack, spending ``budget`` and
    tripping ``breaker``."""

    # Its middleware too is made at the first call (more than half of a run's construction
    # time otherwise, for a subagent most runs never call), bound to this run's budget and breaker.
    def build() -> Runnable[Any, Any]:
        return create_agent(
            inputs.model,
            tools=inputs.tools,
            system_prompt=GENERAL_PURPOSE_SUBAGENT["system_prompt"],
            middleware=coder_subagent_middleware(inputs, budget, breaker),
            state_schema=DeepAgentState,
            name=GENERAL_PURPOSE_SUBAGENT["name"],
        )

    return general_purpose(BuiltAtFirstCall(build))


def general_purpose(runnable: Runnable[Any, Any]) -> CompiledSubAgent:
    """The framework's general-purpose subagent, run by ``runnable``."""
    return {
        "name": GENERAL_PURPOSE_SUBAGENT["name"],
        "description": GENERAL_PURPOSE_SUBAGENT["description"],
        "runnable": runnable,
    }
