"""The ``reviewer`` graph (named in ``langgraph.json``): a read-only deep agent in a sandbox
holding the pull request's head, with the reviewer's tools and its lean middleware stack.

Nothing it has can write: of the framework's tools it keeps the reading ones (``ls``,
``read_file``, ``glob``, ``grep``), without ``write_file``, ``edit_file``, ``delete``,
``execute`` or ``task`` (:mod:`drydock.graphs.subagents`: the reviewer has no subagent). It
reads the history with the read-only ``git`` tool (:mod:`drydock.tools.read_only_git`), which
runs only diff, log, show and blame with checked arguments. Its sandbox's credential-proxy
grant can only read as well.
"""

from __future__ import annotations

from typing import Any

from deepagents import create_deep_agent
from deepagents.middleware.filesystem import FilesystemMiddleware
from langchain.agents.middleware import AgentMiddleware
from langgraph.graph.state import CompiledStateGraph

from drydock.graphs.inputs import AgentInputs
from drydock.graphs.reviewer_prompt import reviewer_prompt
from drydock.graphs.subagents import NoSubagents
from drydock.graphs.token_count import summarization
from drydock.graphs.turn_state import InboxTurnState
from drydock.middleware import at_the_provider_edge, reviewer_middleware
from drydock.tools import read_only_git

READ_TOOLS: list[Any] = ["ls", "read_file", "glob", "grep"]
"""The framework's file tools the reviewer gets: reading only, no shell."""


def make_reviewer(inputs: AgentInputs) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A fresh reviewer agent for one run of ``inputs.scope.thread_id``."""
    middleware: list[AgentMiddleware[Any, Any, Any]] = [
        FilesystemMiddleware(backend=inputs.backend, tools=READ_TOOLS),
        NoSubagents(),
        *at_the_provider_edge(
            reviewer_middleware(
                thread_id=inputs.scope.thread_id,
                status=inputs.status,
                notifier=inputs.notifier,
                limits=inputs.limits,
                usage=inputs.usage,
                spend=inputs.spend,
                redactor=inputs.redactor,
            )
        ),
    ]
    repository = inputs.checkout.path if inputs.checkout is not None else "/"
    return create_deep_agent(
        inputs.model,
        [*inputs.tools, read_only_git.build(inputs.backend, repository)],
        system_prompt=reviewer_prompt(inputs.scope, inputs.checkout),
        middleware=[*middleware, summarization(inputs.model, inputs.backend)],
        backend=inputs.backend,
        checkpointer=inputs.checkpointer,
        state_schema=InboxTurnState,
        name="reviewer",
    )
