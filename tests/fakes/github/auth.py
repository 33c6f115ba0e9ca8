"""How the fake authenticates callers, as GitHub does: an App by its RS256 JSON web token,
an installation by its access token (``Authorization: token ghs_…`` or ``Bearer ghs_…``, or
as the basic-auth password git sends)."""

from __future__ import annotations

import base64
import binascii
import json
import time
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from fastapi import Request

from tests.fakes.github.errors import GithubError
from tests.fakes.github.state import App, GithubState, InstallationToken

JWT_DOCS = "https://docs.github.com/apps/building-github-apps/authenticating-with-github-apps"
MAX_JWT_LIFETIME = 600
"""GitHub refuses an App JWT whose ``exp`` lies more than ten minutes in the future."""
CLOCK_DRIFT = 60
"""GitHub tolerates an ``iat`` up to about a minute in the future (clock drift)."""


def state(request: Request) -> GithubState:
    github: GithubState = request.app.state.github
    return github


def _b64decode(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _credential(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() in {"bearer", "token"}:
        return value.strip()
    if scheme.lower() == "basic":
        try:
            _, _, password = base64.b64decode(value).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return password
    return None


def authenticated_app(request: Request) -> App:
    """The App whose JWT signs this request; 401 with GitHub's messages otherwise."""
    token = _credential(request)
    if token is None:
        raise GithubError(401, "Requires authentication", JWT_DOCS)
    try:
        header_segment, payload_segment, signature_segment = token.split(".")
        header: dict[str, Any] = json.loads(_b64decode(header_segment))
        claims: dict[str, Any] = json.loads(_b64decode(payload_segment))
        signature = _b64decode(signature_segment)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise GithubError(401, "A JSON web token could not be decoded", JWT_DOCS) from None
    if header.get("alg") != "RS256" or not isinstance(claims, dict):
        raise GithubError(401, "A JSON web token could not be decoded", JWT_DOCS)
    now = int(time.time())
    issued_at, expires = claims.get("iat"), claims.get("exp")
    if not isinstance(issued_at, int) or issued_at > now + CLOCK_DRIFT:
        raise GithubError(
            401,
            "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
            JWT_DOCS,
        )
    if not isinstance(expires, int) or expires <= now:
        raise GithubError(
            401,
            "'Expiration time' claim ('exp') must be a numeric value representing the future time at which "
            "the assertion expires",
            JWT_DOCS,
        )
    if expires - now > MAX_JWT_LIFETIME:
        raise GithubError(401, "'Expiration time' claim ('exp') is too far in the future", JWT_DOCS)
    try:
        app = state(request).apps[int(claims.get("iss", ""))]
    except (KeyError, ValueError, TypeError):
        raise GithubError(401, "Integration not found", JWT_DOCS) from None
    try:
        app.private_key.public_key().verify(
            signature, f"{header_segment}.{payload_segment}".encode(), padding.PKCS1v15(), hashes.SHA256()
        )
    except InvalidSignature:
        raise GithubError(401, "A JSON web token could not be decoded", JWT_DOCS) from None
    return app


def installation_token(request: Request) -> InstallationToken:
    """The live installation token of this request; 401 ``Bad credentials`` otherwise."""
    token = _credential(request)
    if token is None:
        raise GithubError(401, "Requires authentication")
    issued = state(request).tokens.get(token)
    if issued is None or issued.expired():
        raise GithubError(401, "Bad credentials")
    return issued
