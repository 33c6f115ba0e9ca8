"""Proof Key for Code Exchange (RFC 7636, method S256)."""

from __future__ import annotations

import base64
import hashlib
import secrets


def verifier() -> str:
    """A fresh code verifier: 64 characters from the unreserved set."""
    return secrets.token_urlsafe(48)


def challenge(code_verifier: str) -> str:
    """The S256 challenge of ``code_verifier``."""
    digest = hashlib.sha256(code_verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
