"""The ``reviewer`` graph (named in ``langgraph.json``): a read-only deep agent in a sandbox
holding the pull request's head, with the reviewer's tools and its lean middleware stack.

The framework's file tools are cut down to reading ones (``ls``, ``read_file``, ``glob``,
``grep``) plus ``execute``: a shell can write in the sandbox, but the sandbox's read-only
credential-proxy grant refuses pushes and API writes, so nothing leaves it.
"""

from __future__ import annotations

from typing import Any

from deepagents import create_deep_agent
from deepagents.middleware.filesystem import FilesystemMiddleware
from langgraph.graph.state import CompiledStateGraph

from drydock.graphs.inputs import AgentInputs
from drydock.graphs.reviewer_prompt import reviewer_prompt
from drydock.graphs.token_count import summarization
from drydock.graphs.turn_state import InboxTurnState
from drydock.middleware import reviewer_middleware

READ_TOOLS: list[Any] = ["ls", "read_file", "glob", "grep", "execute"]
"""The framework's file and shell tools the reviewer gets (no write_file, edit_file or delete)."""


def make_reviewer(inputs: AgentInputs) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A fresh reviewer agent for one run of ``inputs.scope.thread_id``."""
    middleware = [
        FilesystemMiddleware(backend=inputs.backend, tools=READ_TOOLS),
        *reviewer_middleware(
            thread_id=inputs.scope.thread_id, status=inputs.status, notifier=inputs.notifier, limits=inputs.limits
        ),
    ]
    return create_deep_agent(
        inputs.model,
        inputs.tools,
        system_prompt=reviewer_prompt(inputs.scope, inputs.checkout),
        middleware=[*middleware, summarization(inputs.model, inputs.backend)],
        backend=inputs.backend,
        checkpointer=inputs.checkpointer,
        state_schema=InboxTurnState,
        name="reviewer",
    )
