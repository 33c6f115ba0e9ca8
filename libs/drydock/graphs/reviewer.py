"""The ``reviewer`` graph (named in ``langgraph.json``): a read-only deep agent in a sandbox
holding the pull request's head, with the reviewer's tools and its lean middleware stack.
Nothing it has can write: of the framework's tools it keeps the reading ones (``ls``,
``read_file``, ``glob``, ``grep``), without ``write_file``, ``edit_file``, ``delete``,
``execute`` or ``task`` (:mod:`drydock.graphs.subagents`: the reviewer has no subagent). It
reads the history with the read-only ``git`` tool (:mod:`drydock.tools.read_only_git`), which
runs only diff, log, show and blame with checked arguments. Its sandbox's credential-proxy
grant can only read as well.

The graph is compiled once per model and shared by the process's runs
(:mod:`drydock.graphs.shared`); :func:`reviewer_run` builds what one run brings to it.
"""

from __future__ import annotations

from typing import Any

from deepagents import create_deep_agent
from deepagents.middleware.filesystem import FilesystemMiddleware
from langchain.agents.middleware import AgentMiddleware
from langgraph.graph.state import CompiledStateGraph

from drydock.graphs.inputs import AgentInputs
from drydock.graphs.reviewer_prompt import reviewer_prompt
from drydock.graphs.shared import GRAPHS, RunBackend, RunContext, placeholder_tools, shared_stack
from drydock.graphs.subagents import NoSubagents
from drydock.graphs.token_count import summarization
from drydock.graphs.turn_state import InboxTurnState
from drydock.middleware import at_the_provider_edge, reviewer_middleware
from drydock.tools import read_only_git

READ_TOOLS: list[Any] = ["ls", "read_file", "glob", "grep"]
"""The framework's file tools the reviewer gets: reading only, no shell."""


def reviewer_run(inputs: AgentInputs) -> RunContext:
    """What one run of ``inputs.scope.thread_id`` brings to the shared reviewer graph."""
    steps = at_the_provider_edge(
        reviewer_middleware(
            thread_id=inputs.scope.thread_id,
            status=inputs.status,
            notifier=inputs.notifier,
            limits=inputs.limits,
            usage=inputs.usage,
            spend=inputs.spend,
            redactor=inputs.redactor,
        )
    )
    repository = inputs.checkout.path if inputs.checkout is not None else "/"
    return RunContext(
        model=inputs.model,
        middleware=[*steps, summarization(inputs.model, inputs.backend)],
        tools=[*inputs.tools, read_only_git.build(inputs.backend, repository)],
        backend=inputs.backend,
        system_prompt=reviewer_prompt(inputs.scope, inputs.checkout),
    )


def reviewer_graph(inputs: AgentInputs) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The process's reviewer graph for ``inputs``' model and checkpointer, compiled at the first
    run that needs it."""
    return GRAPHS.of(
        "reviewer", inputs.model, None, inputs.checkpointer, lambda: shared_reviewer(inputs, reviewer_run(inputs))
    )


def shared_reviewer(inputs: AgentInputs, run: RunContext) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The reviewer graph for ``inputs``' model, shaped after ``run``; it keeps nothing of that run."""
    middleware: list[AgentMiddleware[Any, Any, Any]] = [
        FilesystemMiddleware(backend=RunBackend(), tools=READ_TOOLS),
        NoSubagents(),
        *shared_stack(run.middleware),
    ]
    return create_deep_agent(
        inputs.model,
        placeholder_tools(run.tools),
        middleware=middleware,
        backend=RunBackend(),
        checkpointer=inputs.checkpointer,
        state_schema=InboxTurnState,
        name="reviewer",
    )
