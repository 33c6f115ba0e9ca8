"""Names, labels and annotations of sandbox pods: the one place they are spelled.

Kubernetes label values are at most 63 characters of ``[A-Za-z0-9._-]`` starting and ending
alphanumeric; a caller's label that does not fit is made to fit by :func:`label_value` (and
kept exactly in the :data:`LABELS_ANNOTATION`).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping

APP_LABEL = "app.kubernetes.io/name"
APP = "drydock-sandbox"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "drydock"
SANDBOX_LABEL = "drydock.dev/sandbox"
THREAD_LABEL = "drydock.dev/thread"
ORIGIN_LABEL = "drydock.dev/origin"
CALLER_LABEL_PREFIX = "drydock.dev/"
"""A caller's label ``role`` becomes the pod label ``drydock.dev/role``."""

THREAD_ANNOTATION = "drydock.dev/thread-id"
LABELS_ANNOTATION = "drydock.dev/labels"
"""The caller's labels, exactly, as JSON."""

ORIGIN_CREATED = "create"
ORIGIN_WARM_POOL = "warm-pool"

CONTAINER = "daemon"
TOKEN_KEY = "token"

_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_NAME_SEGMENT = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_MAX_VALUE = 63


def new_sandbox_id() -> str:
    """A fresh sandbox id; it is also the pod's and the token Secret's name (a DNS label)."""
    return f"sbx-{uuid.uuid4().hex}"


def label_value(raw: str) -> str:
    """``raw`` if it is a valid label value; otherwise a valid value derived from it, with a
    hash suffix so that different inputs stay different."""
    if len(raw) <= _MAX_VALUE and _VALUE.match(raw):
        return raw
    digest = hashlib.sha256(raw.encode()).hexdigest()[:10]
    cleaned = re.sub(r"[^-A-Za-z0-9_.]", "-", raw)[: _MAX_VALUE - len(digest) - 1].strip("-_.")
    return f"{cleaned}-{digest}" if cleaned else digest


def caller_label_key(name: str) -> str | None:
    """The pod label key for a caller's label, or ``None`` if ``name`` cannot be one."""
    return CALLER_LABEL_PREFIX + name if _NAME_SEGMENT.match(name) else None


def selector(labels: Mapping[str, str]) -> str:
    """A label selector matching every label in ``labels``."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


SANDBOX_SELECTOR = selector({APP_LABEL: APP, MANAGED_BY_LABEL: MANAGED_BY})
"""Matches every sandbox pod Drydock made, and nothing else."""
