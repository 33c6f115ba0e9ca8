from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from drydock.config import CryptoSettings
from drydock.infra.server_keys import MissingServerKeys, Purpose, ServerKeys, ServerKeysError


def key() -> str:
    return Fernet.generate_key().decode()


class TestSigning:
    def test_a_mac_verifies_for_its_purpose_and_parts_only(self) -> None:
        keys = ServerKeys([key()])
        mac = keys.sign(Purpose.GRANT, "digest", "coder")
        assert keys.verify(Purpose.GRANT, mac, "digest", "coder")
        assert not keys.verify(Purpose.SESSION, mac, "digest", "coder")
        assert not keys.verify(Purpose.GRANT, mac, "digest", "reviewer")
        assert not keys.verify(Purpose.GRANT, mac, "digestc", "oder")

    def test_an_absent_part_differs_from_an_empty_one(self) -> None:
        keys = ServerKeys([key()])
        assert not keys.verify(Purpose.GRANT, keys.sign(Purpose.GRANT, "d", None), "d", "")

    def test_another_key_ring_cannot_verify(self) -> None:
        mac = ServerKeys([key()]).sign(Purpose.GRANT, "d")
        assert not ServerKeys([key()]).verify(Purpose.GRANT, mac, "d")

    def test_rotation_verifies_under_every_key_and_signs_under_the_newest(self) -> None:
        old, new = key(), key()
        before = ServerKeys([old]).sign(Purpose.GRANT, "d")
        rotated = ServerKeys([new, old])
        assert rotated.verify(Purpose.GRANT, before, "d")
        assert ServerKeys([new]).verify(Purpose.GRANT, rotated.sign(Purpose.GRANT, "d"), "d")


class TestDerivedSecrets:
    def test_rederived_by_key_id_and_identified(self) -> None:
        old, new = key(), key()
        secret, key_id = ServerKeys([old]).derive(Purpose.DAEMON_TOKEN, "sbx-1")
        rotated = ServerKeys([new, old])
        assert rotated.rederive(Purpose.DAEMON_TOKEN, key_id, "sbx-1") == secret
        assert rotated.identify(Purpose.DAEMON_TOKEN, secret, "sbx-1") == key_id
        assert rotated.derive(Purpose.DAEMON_TOKEN, "sbx-1")[0] != secret
        assert ServerKeys([new]).rederive(Purpose.DAEMON_TOKEN, key_id, "sbx-1") is None
        assert rotated.identify(Purpose.DAEMON_TOKEN, secret, "sbx-2") is None


class TestConfiguration:
    def test_no_keys_names_the_setting(self) -> None:
        with pytest.raises(MissingServerKeys, match="DRYDOCK_CRYPTO_KEYS"):
            ServerKeys.from_settings(CryptoSettings())

    @pytest.mark.parametrize("bad", ["not base64 at all!", "c2hvcnQ="])
    def test_a_malformed_key_is_named_by_position(self, bad: str) -> None:
        with pytest.raises(ServerKeysError, match="key #2 of DRYDOCK_CRYPTO_KEYS is not a Fernet key"):
            ServerKeys([key(), bad])
