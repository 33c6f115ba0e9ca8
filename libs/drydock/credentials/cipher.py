"""Encryption at rest for credentials: Fernet under a key ring with rotation.

Keys come from ``settings.crypto.keys`` (``DRYDOCK_CRYPTO_KEYS``), newest first. The newest key
encrypts; every key decrypts, so ciphertexts written before a rotation stay readable until
:meth:`SecretCipher.rotate` re-encrypts them under the newest key.
"""

from __future__ import annotations

import binascii
from collections.abc import Sequence

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from pydantic import SecretStr


class CipherError(RuntimeError):
    """Encryption keys are missing or malformed, or a ciphertext cannot be decrypted with any of them."""


class SecretCipher:
    """Encrypts and decrypts short secrets (tokens) with a Fernet key ring."""

    def __init__(self, keys: Sequence[SecretStr | str]) -> None:
        if not keys:
            raise CipherError(
                "no encryption keys: set DRYDOCK_CRYPTO_KEYS to a JSON list of Fernet keys, newest first "
                "(generate one with "
                "`python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`)"
            )
        fernets = []
        for position, key in enumerate(keys):
            raw = key.get_secret_value() if isinstance(key, SecretStr) else key
            try:
                fernets.append(Fernet(raw))
            except (ValueError, binascii.Error):
                raise CipherError(
                    f"encryption key #{position + 1} of DRYDOCK_CRYPTO_KEYS is not a Fernet key "
                    "(32 url-safe base64-encoded bytes)"
                ) from None
        self._ring = MultiFernet(fernets)
        self._newest = fernets[0]

    def encrypt(self, plaintext: str) -> str:
        """Ciphertext under the newest key."""
        return self._ring.encrypt(plaintext.encode()).decode()

    def decrypt(self, ciphertext: str) -> str:
        """The plaintext, with whichever configured key wrote it."""
        try:
            return self._ring.decrypt(ciphertext.encode()).decode()
        except InvalidToken:
            raise CipherError("ciphertext cannot be decrypted with any configured key (removed too early?)") from None

    def is_current(self, ciphertext: str) -> bool:
        """Whether ``ciphertext`` is already under the newest key."""
        try:
            self._newest.decrypt(ciphertext.encode())
        except InvalidToken:
            return False
        return True

    def rotate(self, ciphertext: str) -> str:
        """``ciphertext`` re-encrypted under the newest key (same plaintext)."""
        try:
            return self._ring.rotate(ciphertext.encode()).decode()
        except InvalidToken:
            raise CipherError("ciphertext cannot be decrypted with any configured key (removed too early?)") from None
