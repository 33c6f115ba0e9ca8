"""What a role's graph factory is given for one thread run. The worker assembles it (sandbox,
model, tools, channel adapters); the factory only decides how the agent is put together."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from drydock.middleware import InboxReader, RunLimits, SandboxFailureCounter, SourceNotifier, StatusReporter
from drydock.middleware.protocols import SpendGuard, UsageRecorder
from drydock.redaction import Redactor
from drydock.sandbox.backend import SandboxBackend
from drydock.threads.checkout import Checkout
from drydock.threads.scope import ThreadScope


@dataclass(frozen=True)
class AgentInputs:
    scope: ThreadScope
    model: BaseChatModel
    fallback: BaseChatModel | None
    """Given only when it differs from ``model``."""
    backend: SandboxBackend
    tools: list[BaseTool]
    checkpointer: BaseCheckpointSaver[Any]
    inbox: InboxReader
    sandbox_failures: SandboxFailureCounter
    status: StatusReporter | None
    notifier: SourceNotifier | None
    checkout: Checkout | None
    limits: RunLimits = field(default_factory=RunLimits)
    branch_prefix: str = "drydock/"
    auto_open_pr: bool = True
    """The user lets the agent open pull requests without being asked (their profile's flag)."""
    usage: UsageRecorder | None = None
    """Records each model call's tokens and cost (None: not recorded)."""
    redactor: Redactor | None = None
    """Redacts secrets from what the agent's tools send out (None: nothing redacted)."""
    spend: SpendGuard | None = None
    """Checks the run's spend limits before each model call (None: no spend limit)."""
    plan_refusal: Callable[[], Awaitable[str | None]] | None = None
    """Why the thread may not change its repository yet under plan approval (None: no such gate)."""


GraphFactory = Callable[[RunnableConfig], CompiledStateGraph[Any, Any, Any, Any]]
"""A role's graph factory, as named in ``langgraph.json``: the run's config in (its
``configurable`` carries the :class:`AgentInputs`, see :mod:`drydock.graphs.entrypoints`), the
compiled graph out, as LangGraph's CLI and server call it."""
