"""One INFO line per step of a run, with its thread id: what an operator reads to follow a thread
from the webhook to its end (``run started`` → ``model call`` → ``tool call`` → ``posted`` →
``run completed``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    # Only for types: the bus imports this module.
    from drydock.bus.envelopes import RunEvent

log = structlog.get_logger("drydock.story")

SHORT = 120
"""The longest argument or output excerpt a story line carries."""


def _short(value: Any) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= SHORT else text[: SHORT - 1] + "…"


def _fields(event: RunEvent) -> tuple[str, dict[str, Any]] | None:
    data = event.data
    match event.type.value:
        case "started":
            return "run started", {"model": data.get("model"), "effort": data.get("effort")}
        case "model_call":
            return "model call", {
                "input_tokens": data.get("input_tokens"),
                "output_tokens": data.get("output_tokens"),
                "seconds": data.get("seconds"),
                "tool_calls": ",".join(data.get("tool_calls") or []) or None,
            }
        case "tool_call":
            return "tool call", {
                "tool": data.get("name"),
                "arguments": _short(data["arguments"]) if data.get("arguments") else None,
                "outcome": data.get("status"),
                "exit_code": data.get("exit_code"),
            }
        case "message_posted":
            return "posted", {"channel": data.get("channel"), "target": data.get("target"), "url": data.get("url")}
        case "completed":
            return "run completed", {"skipped": data.get("skipped") or None}
        case "stopped":
            return "run stopped", {"by": data.get("by")}
        case "step_limit":
            return "run stopped at the step limit", {"model_calls": data.get("model_calls")}
        case "error":
            return "run failed", {"error": _short(data.get("error", ""))}
        case "plan_submitted":
            return "plan held for approval", {"revision": data.get("revision")}
        case "push_held":
            return "push held for approval", {"change": data.get("change"), "paths": _short(data.get("paths", ""))}
        case "approved":
            return "approved", {"by": data.get("by"), "plan": data.get("plan"), "pushes": data.get("pushes")}
        case _:
            return None


def tell(event: RunEvent) -> None:
    """Log the story line of a run event (events that are not steps of a run log nothing)."""
    found = _fields(event)
    if found is None:
        return
    message, values = found
    present = {key: value for key, value in values.items() if value is not None}
    log.info(message, thread_id=event.thread_id, run_id=event.run_id, **present)
