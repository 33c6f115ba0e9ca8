"""The JSON web token a GitHub App signs to act as itself (RS256, ``iss`` = the App id)."""

from __future__ import annotations

import base64
import functools
import json
import time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

BACKDATE = 60
"""Seconds ``iat`` lies in the past, as GitHub recommends against clock drift."""
LIFETIME = 540
"""Seconds until ``exp``; GitHub refuses more than ten minutes after ``iat``."""


class AppKeyError(ValueError):
    """The App's private key is not an RSA private key in PEM."""


@functools.lru_cache(maxsize=8)
def load_app_key(pem: str) -> rsa.RSAPrivateKey:
    """Parse the PEM a GitHub App owner downloads (PKCS#1 or PKCS#8); cached, because checking
    an RSA key's consistency takes tens of milliseconds."""
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        raise AppKeyError("DRYDOCK_GITHUB_PRIVATE_KEY is not an unencrypted PEM private key") from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise AppKeyError("DRYDOCK_GITHUB_PRIVATE_KEY must be the App's RSA private key")
    return key


def _segment(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def app_jwt(app_id: int, key: rsa.RSAPrivateKey, *, now: float | None = None) -> str:
    """A JWT for ``app_id`` valid for nine minutes from (a minute before) ``now``."""
    issued = int(now if now is not None else time.time()) - BACKDATE
    header = _segment(json.dumps({"alg": "RS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = _segment(
        json.dumps(
            {"iat": issued, "exp": issued + BACKDATE + LIFETIME, "iss": str(app_id)}, separators=(",", ":")
        ).encode()
    )
    signature = key.sign(f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{header}.{claims}.{_segment(signature)}"


class AppBearer:
    """The ``Authorization`` value an App sends as itself, re-signed a minute before it expires."""

    def __init__(self, app_id: int, private_key_pem: str) -> None:
        self.app_id = app_id
        self._key = load_app_key(private_key_pem)
        self._jwt: tuple[str, float] | None = None

    def header(self) -> str:
        now = time.time()
        if self._jwt is None or self._jwt[1] - now < BACKDATE:
            self._jwt = (app_jwt(self.app_id, self._key, now=now), now + LIFETIME)
        return f"Bearer {self._jwt[0]}"
