"""Linear webhook verification: ``Linear-Signature: <hex HMAC-SHA256(secret, body)>``, and the
signed body's ``webhookTimestamp`` (milliseconds) within 60 s of now, against replays."""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from drydock.channels.errors import VerificationFailed

SIGNATURE_HEADER = "linear-signature"
DEFAULT_TOLERANCE = timedelta(seconds=60)


def signature(secret: bytes, body: bytes) -> str:
    """The ``Linear-Signature`` value Linear sends for ``body``."""
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify_signature(secret: bytes, body: bytes, header: str | None) -> None:
    """Raise :class:`VerificationFailed` unless ``header`` signs ``body`` with ``secret``."""
    if not header:
        raise VerificationFailed("missing Linear-Signature header")
    expected = signature(secret, body).encode()
    if not hmac.compare_digest(expected, header.strip().lower().encode("latin-1", errors="replace")):
        raise VerificationFailed("Linear-Signature does not match the body")


def verify_timestamp(
    payload: Mapping[str, Any], *, now: float | None = None, tolerance: timedelta = DEFAULT_TOLERANCE
) -> None:
    """Raise :class:`VerificationFailed` unless the signed ``webhookTimestamp`` is recent.
    Call it only after :func:`verify_signature`: the timestamp is trusted because it is signed."""
    sent_at = payload.get("webhookTimestamp")
    if isinstance(sent_at, bool) or not isinstance(sent_at, int | float):
        raise VerificationFailed("webhookTimestamp is missing or not a number")
    try:
        sent_seconds = float(sent_at) / 1000
    except OverflowError:
        sent_seconds = math.inf
    current = time.time() if now is None else now
    if not math.isfinite(sent_seconds) or abs(current - sent_seconds) > tolerance.total_seconds():
        raise VerificationFailed("webhookTimestamp is outside the replay window")
