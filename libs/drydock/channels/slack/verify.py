"""Slack request verification: ``X-Slack-Signature: v0=<hex HMAC-SHA256(secret, "v0:{ts}:{body}")>``
with ``X-Slack-Request-Timestamp`` within a window (300 s) of now, against replays."""

from __future__ import annotations

import hashlib
import hmac
import time
from datetime import timedelta

from drydock.channels.errors import VerificationFailed

SIGNATURE_HEADER = "x-slack-signature"
TIMESTAMP_HEADER = "x-slack-request-timestamp"
DEFAULT_TOLERANCE = timedelta(seconds=300)


def signature(secret: bytes, timestamp: str, body: bytes) -> str:
    """The ``X-Slack-Signature`` value Slack sends for ``body`` at ``timestamp``."""
    return "v0=" + hmac.new(secret, b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()


def verify(
    secret: bytes,
    body: bytes,
    *,
    timestamp: str | None,
    header: str | None,
    now: float | None = None,
    tolerance: timedelta = DEFAULT_TOLERANCE,
) -> None:
    """Raise :class:`VerificationFailed` unless the request is signed with ``secret`` and recent."""
    if not header:
        raise VerificationFailed("missing X-Slack-Signature header")
    if not timestamp:
        raise VerificationFailed("missing X-Slack-Request-Timestamp header")
    try:
        sent_at = int(timestamp.strip())
    except ValueError:
        raise VerificationFailed("X-Slack-Request-Timestamp is not a Unix time") from None
    current = time.time() if now is None else now
    if abs(current - min(max(sent_at, 0), 2**53)) > tolerance.total_seconds():
        raise VerificationFailed("X-Slack-Request-Timestamp is outside the replay window")
    expected = signature(secret, timestamp.strip(), body).encode()
    if not hmac.compare_digest(expected, header.strip().encode("latin-1", errors="replace")):
        raise VerificationFailed("X-Slack-Signature does not match the body")
