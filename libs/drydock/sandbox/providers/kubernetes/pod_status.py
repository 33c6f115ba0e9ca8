"""What a pod's status means for a sandbox: starting, running (with its IP), or failed and why.

Image-pull and container-configuration errors are failures at once (the kubelet would retry
them with back-off, but a sandbox creation is not worth waiting minutes for a typo in the image
name); an unschedulable pod stays *starting* until the start timeout, and its reason is kept for
the error message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from drydock.sandbox.providers.kubernetes import naming

FATAL_WAITING_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
    }
)


class Phase(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    FAILED = "failed"


@dataclass(frozen=True)
class PodState:
    phase: Phase
    reason: str = ""
    ip: str | None = None


def _waiting(statuses: list[Mapping[str, Any]]) -> tuple[str, str, str] | None:
    for status in statuses:
        waiting = (status.get("state") or {}).get("waiting")
        if waiting:
            return status.get("name", "?"), waiting.get("reason", ""), waiting.get("message", "")
    return None


def _terminated(statuses: list[Mapping[str, Any]]) -> tuple[str, Mapping[str, Any]] | None:
    for status in statuses:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated:
            return status.get("name", "?"), terminated
    return None


def _describe_termination(container: str, terminated: Mapping[str, Any]) -> str:
    text = f"container {container} exited with {terminated.get('exitCode', '?')}"
    if terminated.get("reason"):
        text += f" ({terminated['reason']})"
    if terminated.get("message"):
        text += f": {terminated['message']}"
    return text


def pod_state(pod: Mapping[str, Any]) -> PodState:
    """Classify a pod (its JSON form, camelCase keys)."""
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if metadata.get("deletionTimestamp"):
        return PodState(Phase.FAILED, "the pod is being deleted")
    init_statuses = list(status.get("initContainerStatuses") or [])
    statuses = list(status.get("containerStatuses") or [])
    phase = status.get("phase", "Pending")
    if phase in ("Failed", "Succeeded"):
        ended = _terminated(statuses) or _terminated(init_statuses)
        if ended is not None:
            return PodState(Phase.FAILED, f"pod {phase.lower()}: " + _describe_termination(*ended))
        detail = ": ".join(part for part in (status.get("reason"), status.get("message")) if part)
        return PodState(Phase.FAILED, f"pod {phase.lower()}" + (f": {detail}" if detail else ""))
    for group in (init_statuses, statuses):
        waiting = _waiting(group)
        if waiting is not None and waiting[1] in FATAL_WAITING_REASONS:
            container, reason, message = waiting
            return PodState(Phase.FAILED, f"container {container}: {reason}" + (f": {message}" if message else ""))
    for init in init_statuses:
        terminated = (init.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode", 0) != 0:
            return PodState(Phase.FAILED, "init " + _describe_termination(init.get("name", "?"), terminated))
    daemon = next((s for s in statuses if s.get("name") == naming.CONTAINER), None)
    running = daemon is not None and (daemon.get("state") or {}).get("running") is not None
    if phase == "Running" and running and status.get("podIP"):
        return PodState(Phase.RUNNING, ip=status["podIP"])
    return PodState(Phase.STARTING, _pending_reason(status))


def _pending_reason(status: Mapping[str, Any]) -> str:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f"not scheduled: {condition.get('message') or condition.get('reason', 'unknown')}"
    waiting = _waiting(list(status.get("initContainerStatuses") or [])) or _waiting(
        list(status.get("containerStatuses") or [])
    )
    if waiting is not None:
        return f"container {waiting[0]} waiting: {waiting[1]}"
    return f"pod {str(status.get('phase', 'Pending')).lower()}"
