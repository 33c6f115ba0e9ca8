"""GitHub webhook verification: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>``."""

from __future__ import annotations

import hashlib
import hmac

from drydock.channels.errors import VerificationFailed

SIGNATURE_HEADER = "x-hub-signature-256"
_PREFIX = b"sha256="


def signature(secret: bytes, body: bytes) -> str:
    """The header value GitHub sends for ``body``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(secret: bytes, body: bytes, header: str | None) -> None:
    """Raise :class:`VerificationFailed` unless ``header`` signs ``body`` with ``secret``
    (constant-time comparison)."""
    if not header:
        raise VerificationFailed("missing X-Hub-Signature-256 header")
    given = header.strip().encode("latin-1", errors="replace")
    if not given.startswith(_PREFIX):
        raise VerificationFailed("X-Hub-Signature-256 is not of the form sha256=<hex>")
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest().encode()
    if not hmac.compare_digest(expected, given[len(_PREFIX) :]):
        raise VerificationFailed("X-Hub-Signature-256 does not match the body")
