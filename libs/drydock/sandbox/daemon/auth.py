"""Bearer-token authentication for every daemon request (constant-time comparison)."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from drydock.sandbox.daemon.http11 import HttpError


def require_bearer(headers: Mapping[str, str], expected: bytes) -> None:
    """Raise a 401 :class:`HttpError` unless ``headers`` carry ``Authorization: Bearer <expected>``."""
    scheme, _, provided = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(provided.strip().encode(), expected):
        raise HttpError(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})
