"""Which sandbox pods have lost their records: the rule the reaper applies to pods.

A pod is an orphan when it carries the sandbox labels (its ``drydock.dev/sandbox`` label names
the pod itself, and it is managed by Drydock), has no record in Redis and is not an idle member
of the warm pool. The reaper deletes an orphan once it is older than the orphan grace, which
protects a creation whose record is not written yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from typing import Any

from drydock.sandbox.providers.kubernetes import naming


def is_sandbox_pod(pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` (as the API serializes it) is one of Drydock's sandbox pods."""
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    return (
        bool(metadata.get("name"))
        and labels.get(naming.SANDBOX_LABEL) == metadata.get("name")
        and labels.get(naming.MANAGED_BY_LABEL) == naming.MANAGED_BY
    )


def orphan_pods(pods: Iterable[Mapping[str, Any]], *, recorded: Set[str], pooled: Set[str]) -> list[Mapping[str, Any]]:
    """The sandbox pods among ``pods`` whose names are neither ``recorded`` nor ``pooled``."""
    return [
        pod
        for pod in pods
        if is_sandbox_pod(pod) and pod["metadata"]["name"] not in recorded and pod["metadata"]["name"] not in pooled
    ]
