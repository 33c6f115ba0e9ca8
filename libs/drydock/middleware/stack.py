"""The ordered middleware lists of the roles: the one place their order is encoded.

The coder's middleware, in this order (DESIGN.md section 6):

1. ``SanitizeToolInputs``: sanitize and normalize tool inputs
2. ``ModelCallLimit``: limit model calls, ending gracefully at the limit
3. ``ToolErrorsAsMessages``: turn tool exceptions into tool messages
4. ``ScopedInstructions``: append ancestor AGENTS.md files to file reads, once per run
5. ``InboxInjection``: inject queued inbox messages before the next model call
6. ``StatusIndicators``: update external status indicators at model-call boundaries
7. ``EmptyReplyNudge``: replace an empty model reply with a continue or confirm-completion call
8. ``StepLimitNotice``: notify the source channel when the step limit is reached
9. ``SandboxCircuitBreaker``: trip a circuit breaker after repeated sandbox failures
10. ``ModelFallbackMiddleware``: the fallback model, only when one distinct from the primary is configured
11. ``StripMalformedReasoning``: strip malformed reasoning blocks immediately before the provider call

The reviewer's list is the same without 4, 5, 9 and 10 (no scoped instruction files, no inbox
injection, no sandbox recovery, no fallback model). The analyzer's is leaner still: it answers no
conversation, so it also leaves out 6 and 8 (status indicators, step-limit notice).

LangChain runs ``before_*`` hooks in list order, ``after_*`` hooks in reverse, and composes
``wrap_*`` hooks first-outermost: sanitizing sees the final reply of every model call, a tool's
exception passes the circuit breaker (which counts it) before it becomes an error message, and
stripping reasoning is the last change to a request, also for the fallback model's attempt.
``tests/middleware/test_stack.py`` pins this docstring, the name lists and the built lists
against each other.

In a deep agent (:func:`at_the_provider_edge`) step 11 moves into
:class:`~drydock.middleware.provider_edge.ProviderEdge`, which takes the slot of the
framework's own last middleware: ``create_deep_agent`` puts the caller's middleware after its
base stack (filesystem, subagents, summarization, patching tool calls) and before its tail
(prompt caching, unsupported content), so only that slot is innermost. A subagent runs its
role's steps in the same order (``subagent=True``): it spends the run's one
:class:`~drydock.middleware.model_call_limit.StepBudget`, shares the run's one
:class:`~drydock.middleware.sandbox_circuit_breaker.SandboxCircuitBreaker` instance, and
leaves the conversation (inbox, status, notices) to the agent that called it.
``tests/graphs/test_roles.py`` pins each role's whole built stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel

from drydock.middleware.empty_reply import EmptyReplyNudge
from drydock.middleware.inbox_injection import InboxInjection
from drydock.middleware.model_call_limit import ModelCallLimit, StepBudget
from drydock.middleware.model_fallback import model_fallback
from drydock.middleware.protocols import (
    InboxReader,
    InstructionFileReader,
    SandboxFailureCounter,
    SourceNotifier,
    SpendGuard,
    StatusReporter,
    UsageRecorder,
)
from drydock.middleware.provider_edge import ProviderEdge
from drydock.middleware.sandbox_circuit_breaker import SandboxCircuitBreaker
from drydock.middleware.sanitize_tool_inputs import SanitizeToolInputs
from drydock.middleware.scoped_instructions import ScopedInstructions
from drydock.middleware.status_indicators import StatusIndicators
from drydock.middleware.step_limit_notice import StepLimitNotice
from drydock.middleware.strip_reasoning import StripMalformedReasoning
from drydock.middleware.tool_errors import ToolErrorsAsMessages
from drydock.redaction import Redactor
from drydock.roles import Role

CODER_ORDER: tuple[str, ...] = (
    "SanitizeToolInputs",
    "ModelCallLimit",
    "ToolErrorsAsMessages",
    "ScopedInstructions",
    "InboxInjection",
    "StatusIndicators",
    "EmptyReplyNudge",
    "StepLimitNotice",
    "SandboxCircuitBreaker",
    "ModelFallbackMiddleware",
    "StripMalformedReasoning",
)

REVIEWER_ORDER: tuple[str, ...] = tuple(
    name
    for name in CODER_ORDER
    if name not in {"ScopedInstructions", "InboxInjection", "SandboxCircuitBreaker", "ModelFallbackMiddleware"}
)

ANALYZER_ORDER: tuple[str, ...] = tuple(
    name for name in REVIEWER_ORDER if name not in {"StatusIndicators", "StepLimitNotice"}
)


@dataclass(frozen=True)
class RunLimits:
    """Bounds of one run."""

    model_calls: int = 150
    """Model calls per run (the step limit)."""
    empty_replies: int = 3
    """Empty replies in a row answered with a nudge before the run fails."""
    sandbox_failures: int = 3
    """Consecutive sandbox failures that trip the circuit breaker."""


def _limit(
    limits: RunLimits,
    budget: StepBudget | None,
    subagent: bool,
    usage: UsageRecorder | None,
    spend: SpendGuard | None,
) -> ModelCallLimit:
    if subagent and budget is None:
        raise ValueError("a subagent's stack needs the budget of the run that starts it")
    return ModelCallLimit(budget or limits.model_calls, subagent=subagent, usage=usage, spend=spend)


def coder_middleware(
    *,
    thread_id: str,
    inbox: InboxReader | None,
    sandbox_failures: SandboxFailureCounter,
    status: StatusReporter | None = None,
    notifier: SourceNotifier | None = None,
    instructions: InstructionFileReader | None = None,
    repository_root: str = "/",
    fallback: BaseChatModel | None = None,
    limits: RunLimits = RunLimits(),
    budget: StepBudget | None = None,
    breaker: SandboxCircuitBreaker | None = None,
    subagent: bool = False,
    usage: UsageRecorder | None = None,
    redactor: Redactor | None = None,
    spend: SpendGuard | None = None,
) -> list[AgentMiddleware[Any, Any, Any]]:
    """The coder's middleware for one run of ``thread_id``, in :data:`CODER_ORDER`.

    ``inbox`` is the thread's inbox (None: nothing injected); ``status`` and ``notifier`` are
    bound to the thread's source channel (None: no indicator, no notices); ``instructions``
    reads the sandbox's files under ``repository_root``; ``fallback`` is the fallback model,
    given only when it differs from the run's model. ``budget`` is the run's step budget (None:
    one of ``limits.model_calls``); a ``subagent`` stack spends the budget of the run that
    started it and trips its ``breaker`` (the very instance in the run's own stack). ``usage``
    records each model call's tokens and cost and ``spend`` checks the spend limits before each
    (step 2); ``redactor`` redacts secrets from the
    arguments of outbound tools (step 1).
    """
    if subagent and breaker is None:
        raise ValueError("a subagent's stack needs the circuit breaker of the run that starts it")
    stack: list[AgentMiddleware[Any, Any, Any] | None] = [
        SanitizeToolInputs(redactor, thread_id),
        _limit(limits, budget, subagent, usage, spend),
        ToolErrorsAsMessages(thread_id),
        ScopedInstructions(instructions, repository_root),
        InboxInjection(inbox, thread_id),
        StatusIndicators(status, thread_id),
        EmptyReplyNudge(max_nudges=limits.empty_replies, role=Role.CODER),
        StepLimitNotice(notifier, thread_id),
        breaker
        or SandboxCircuitBreaker(sandbox_failures, thread_id, notifier=notifier, threshold=limits.sandbox_failures),
        model_fallback(fallback),
        StripMalformedReasoning(),
    ]
    return [middleware for middleware in stack if middleware is not None]


def reviewer_middleware(
    *,
    thread_id: str,
    status: StatusReporter | None = None,
    notifier: SourceNotifier | None = None,
    limits: RunLimits = RunLimits(),
    usage: UsageRecorder | None = None,
    redactor: Redactor | None = None,
    spend: SpendGuard | None = None,
) -> list[AgentMiddleware[Any, Any, Any]]:
    """The reviewer's leaner middleware for one run of ``thread_id``, in :data:`REVIEWER_ORDER`."""
    return [
        SanitizeToolInputs(redactor, thread_id),
        ModelCallLimit(limits.model_calls, usage=usage, spend=spend),
        ToolErrorsAsMessages(thread_id),
        StatusIndicators(status, thread_id),
        EmptyReplyNudge(max_nudges=limits.empty_replies, role=Role.REVIEWER),
        StepLimitNotice(notifier, thread_id),
        StripMalformedReasoning(),
    ]


def analyzer_middleware(
    *,
    thread_id: str,
    limits: RunLimits = RunLimits(),
    usage: UsageRecorder | None = None,
    redactor: Redactor | None = None,
    spend: SpendGuard | None = None,
) -> list[AgentMiddleware[Any, Any, Any]]:
    """The analyzer's middleware for one run of ``thread_id``, in :data:`ANALYZER_ORDER`."""
    return [
        SanitizeToolInputs(redactor, thread_id),
        ModelCallLimit(limits.model_calls, usage=usage, spend=spend),
        ToolErrorsAsMessages(thread_id),
        EmptyReplyNudge(max_nudges=limits.empty_replies, role=Role.ANALYZER),
        StripMalformedReasoning(),
    ]


def at_the_provider_edge(stack: list[AgentMiddleware[Any, Any, Any]]) -> list[AgentMiddleware[Any, Any, Any]]:
    """``stack`` as given to ``create_deep_agent``: its last step, stripping malformed reasoning,
    inside a :class:`ProviderEdge` that takes the framework's last slot."""
    *steps, last = stack
    if not isinstance(last, StripMalformedReasoning):
        raise ValueError(f"a role's stack ends with StripMalformedReasoning, not {last.name}")
    return [*steps, ProviderEdge(last)]
