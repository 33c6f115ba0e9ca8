"""Per-purpose MAC keys derived from the server's key ring, so that a record in Redis can prove
Drydock wrote it.

Each key of ``DRYDOCK_CRYPTO_KEYS`` (Fernet keys, newest first) yields one HMAC-SHA256 key per
:class:`Purpose` through HKDF-SHA256 (``info`` names the purpose), so a MAC made for one kind of
record never verifies as another. The newest key signs; a MAC under any configured key verifies,
so a rotation keeps existing records valid until they are rewritten or expire. Anyone who can
write Redis but does not hold these keys cannot make a record that verifies.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Sequence
from enum import StrEnum

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import SecretStr

from drydock.config import CryptoSettings


class ServerKeysError(RuntimeError):
    """``DRYDOCK_CRYPTO_KEYS`` is missing or holds a malformed key."""


class MissingServerKeys(ServerKeysError):
    """No ``DRYDOCK_CRYPTO_KEYS``: nothing can be signed or verified."""


class Purpose(StrEnum):
    """What a derived key is for; one key per purpose."""

    GRANT = "grant"
    SESSION = "session"
    SANDBOX_RECORD = "sandbox-record"
    DAEMON_TOKEN = "daemon-token"
    APPROVAL = "approval"


def _material(key: SecretStr | str, position: int) -> bytes:
    raw = key.get_secret_value() if isinstance(key, SecretStr) else key
    try:
        decoded = base64.urlsafe_b64decode(raw.encode())
    except (ValueError, binascii.Error):
        decoded = b""
    if len(decoded) != 32:
        raise ServerKeysError(
            f"encryption key #{position + 1} of DRYDOCK_CRYPTO_KEYS is not a Fernet key "
            "(32 url-safe base64-encoded bytes)"
        )
    return decoded


def _message(parts: Sequence[str | None]) -> bytes:
    # A JSON list keeps the boundaries between fields: ("ab", "c") and ("a", "bc") differ, and
    # an absent field (None) differs from an empty one.
    return json.dumps(list(parts), separators=(",", ":")).encode()


class ServerKeys:
    """HMAC keys per purpose from a key ring; see the module docstring."""

    def __init__(self, keys: Sequence[SecretStr | str]) -> None:
        if not keys:
            raise MissingServerKeys(
                "no DRYDOCK_CRYPTO_KEYS: grants, dashboard sessions and sandbox records cannot be signed; "
                "set DRYDOCK_CRYPTO_KEYS to a JSON list of Fernet keys, newest first"
            )
        self._materials = [_material(key, position) for position, key in enumerate(keys)]
        self._derived: dict[Purpose, list[bytes]] = {}

    @classmethod
    def from_settings(cls, crypto: CryptoSettings) -> ServerKeys:
        """The keys of ``settings.crypto``; :class:`MissingServerKeys` when there are none,
        :class:`ServerKeysError` when one is malformed."""
        return cls(crypto.keys)

    def _keys(self, purpose: Purpose) -> list[bytes]:
        derived = self._derived.get(purpose)
        if derived is None:
            derived = [
                HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=f"drydock {purpose}".encode()).derive(m)
                for m in self._materials
            ]
            self._derived[purpose] = derived
        return derived

    def sign(self, purpose: Purpose, *parts: str | None) -> str:
        """The MAC of ``parts`` under the newest key, as hex."""
        return hmac.new(self._keys(purpose)[0], _message(parts), hashlib.sha256).hexdigest()

    def verify(self, purpose: Purpose, mac: str, *parts: str | None) -> bool:
        """Whether ``mac`` is the MAC of ``parts`` under any configured key (constant-time)."""
        message = _message(parts)
        valid = False
        for key in self._keys(purpose):
            valid |= hmac.compare_digest(hmac.new(key, message, hashlib.sha256).hexdigest(), mac)
        return valid

    def derive(self, purpose: Purpose, *parts: str) -> tuple[str, str]:
        """A secret for ``parts`` under the newest key and that key's id, for :meth:`rederive`."""
        key = self._keys(purpose)[0]
        return _secret(key, parts), _key_id(key)

    def identify(self, purpose: Purpose, secret: str, *parts: str) -> str | None:
        """The id of the key under which :meth:`derive` made ``secret`` for ``parts``; ``None``
        when no configured key did."""
        for key in self._keys(purpose):
            if hmac.compare_digest(_secret(key, parts), secret):
                return _key_id(key)
        return None

    def rederive(self, purpose: Purpose, key_id: str, *parts: str) -> str | None:
        """The secret :meth:`derive` made for ``parts`` under the key ``key_id``; ``None`` when
        that key is no longer configured."""
        for key in self._keys(purpose):
            if hmac.compare_digest(_key_id(key), key_id):
                return _secret(key, parts)
        return None


def _secret(key: bytes, parts: Sequence[str]) -> str:
    return base64.urlsafe_b64encode(hmac.new(key, _message(parts), hashlib.sha256).digest()).decode().rstrip("=")


def _key_id(key: bytes) -> str:
    return hmac.new(key, b"key id", hashlib.sha256).hexdigest()[:16]
