"""Middleware around the agents' model and tool calls, each behaviour in its own module, put
in order in one place: :mod:`drydock.middleware.stack`."""

from drydock.middleware.empty_reply import EmptyReplies, EmptyReplyNudge
from drydock.middleware.inbox_injection import InboxInjection, InboxState
from drydock.middleware.model_call_limit import ModelCallLimit, StepBudget
from drydock.middleware.model_fallback import model_fallback
from drydock.middleware.outcome import StopReason, stop_reason
from drydock.middleware.planning import Planning
from drydock.middleware.protocols import (
    InboxReader,
    InstructionFileReader,
    SandboxFailureCounter,
    SourceNotifier,
    StatusReporter,
)
from drydock.middleware.provider_edge import ProviderEdge
from drydock.middleware.sandbox_circuit_breaker import SandboxCircuitBreaker
from drydock.middleware.sanitize_tool_inputs import SanitizeToolInputs
from drydock.middleware.scoped_instructions import BackendInstructionFiles, ScopedInstructions
from drydock.middleware.stack import (
    ANALYZER_ORDER,
    CODER_ORDER,
    REVIEWER_ORDER,
    RunLimits,
    analyzer_middleware,
    at_the_provider_edge,
    coder_middleware,
    reviewer_middleware,
)
from drydock.middleware.status_indicators import StatusIndicators
from drydock.middleware.step_limit_notice import StepLimitNotice
from drydock.middleware.strip_reasoning import StripMalformedReasoning
from drydock.middleware.tool_errors import ToolErrorsAsMessages

__all__ = [
    "ANALYZER_ORDER",
    "CODER_ORDER",
    "REVIEWER_ORDER",
    "BackendInstructionFiles",
    "EmptyReplies",
    "EmptyReplyNudge",
    "InboxInjection",
    "InboxReader",
    "InboxState",
    "InstructionFileReader",
    "ModelCallLimit",
    "Planning",
    "ProviderEdge",
    "RunLimits",
    "SandboxCircuitBreaker",
    "SandboxFailureCounter",
    "SanitizeToolInputs",
    "ScopedInstructions",
    "SourceNotifier",
    "StatusIndicators",
    "StatusReporter",
    "StepBudget",
    "StepLimitNotice",
    "StopReason",
    "StripMalformedReasoning",
    "ToolErrorsAsMessages",
    "analyzer_middleware",
    "at_the_provider_edge",
    "coder_middleware",
    "model_fallback",
    "reviewer_middleware",
    "stop_reason",
]
