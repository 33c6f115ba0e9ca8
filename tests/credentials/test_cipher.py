from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from drydock.credentials import CipherError, SecretCipher


def _key() -> str:
    return Fernet.generate_key().decode()


class TestSecretCipher:
    def test_round_trip_hides_the_plaintext(self) -> None:
        cipher = SecretCipher([SecretStr(_key())])
        ciphertext = cipher.encrypt("ghs_secret")
        assert "ghs_secret" not in ciphertext
        assert cipher.decrypt(ciphertext) == "ghs_secret"

    def test_rotation_keeps_old_ciphertexts_readable(self) -> None:
        old, new = _key(), _key()
        written_before = SecretCipher([old]).encrypt("ghs_before")
        rotated_ring = SecretCipher([new, old])
        assert rotated_ring.decrypt(written_before) == "ghs_before"
        assert not rotated_ring.is_current(written_before)

    def test_rotate_moves_a_ciphertext_to_the_newest_key(self) -> None:
        old, new = _key(), _key()
        written_before = SecretCipher([old]).encrypt("ghs_before")
        rewritten = SecretCipher([new, old]).rotate(written_before)
        assert SecretCipher([new]).decrypt(rewritten) == "ghs_before"
        assert SecretCipher([new]).is_current(rewritten)

    def test_a_retired_key_makes_its_ciphertexts_unreadable(self) -> None:
        old, new = _key(), _key()
        written_before = SecretCipher([old]).encrypt("ghs_before")
        with pytest.raises(CipherError, match="cannot be decrypted"):
            SecretCipher([new]).decrypt(written_before)

    def test_no_keys_is_a_clear_error(self) -> None:
        with pytest.raises(CipherError, match="DRYDOCK_CRYPTO_KEYS"):
            SecretCipher([])

    def test_a_malformed_key_is_named(self) -> None:
        with pytest.raises(CipherError, match="key #2"):
            SecretCipher([_key(), "not-a-fernet-key"])
