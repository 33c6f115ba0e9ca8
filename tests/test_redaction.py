from __future__ import annotations

import pytest
import structlog.testing
from cryptography.fernet import Fernet
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from drydock.config import CryptoSettings, RedisSettings, Settings, SlackSettings
from drydock.redaction import _IN_CONTEXT, Redactor, _in_context

GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
FINE_GRAINED = "github_pat_" + "11ABCDEFG0123456789abc_" + "x" * 59
SLACK = "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
GOOGLE = "AIza" + "SyA-1234567890abcdefghijklmnopqrstu"
JWT = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
CONTEXT_PIECES = [
    *("secret=", "Token: ", 'PASSWORD="', "passwd='", "pwd ", "api_key=", "API-KEY: ", "access_key="),
    *("auth=", "apikey:"),
    *("credential = ", "private_key=", "Bearer ", "basic ", "Basic", "bearer", "tokenizer", "xbearer ", "passw"),
    *("=", ": ", "'", '"', " ", "_", "-", ".", "\n", "\u017fecret=", "\u212aey", "\u0130"),
    *("q8Zr2LmX0vT7wKp4Nc9s", "8f3k2LmQ9zR7tW1xV5nB", "aaaaaaaaaaaaaaaa", "Zm9vYmFyYmF6cXV4MTIz=="),
]
"""Pieces of text around credential names, non-ASCII ones included: a long s and a Kelvin sign (which
ignoring case matches as s and k) and a capital I with a dot (whose lower case is two characters)."""
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1234567890abcdef\n-----END RSA PRIVATE KEY-----"


class TestKnownFormats:
    @pytest.mark.parametrize(
        ("secret", "kind"),
        [
            (GITHUB_TOKEN, "GitHub token"),
            ("ghs_" + "Z" * 36, "GitHub token"),
            ("gho_" + "9" * 36, "GitHub token"),
            (FINE_GRAINED, "GitHub token"),
            (SLACK, "Slack token"),
            (AWS, "AWS access key"),
            (GOOGLE, "Google API key"),
            (JWT, "JWT"),
            (PEM, "private key"),
        ],
    )
    def test_a_secret_is_replaced_by_a_note_naming_its_kind(self, secret: str, kind: str) -> None:
        text = f"Here is what I found:\n{secret}\nand that is all."

        redacted = Redactor().redact(text, where="test")

        assert secret not in redacted
        assert f"[redacted: {kind}]" in redacted
        assert redacted.startswith("Here is what I found:\n")
        assert redacted.endswith("\nand that is all.")

    def test_the_password_of_a_url_is_redacted_and_the_rest_kept(self) -> None:
        redacted = Redactor().redact("origin https://x-access-token:s3cr3tValue@github.com/acme/app.git", where="t")

        assert redacted == "origin https://x-access-token:[redacted: URL credential]@github.com/acme/app.git"

    def test_ordinary_prose_code_and_hashes_are_left_alone(self) -> None:
        text = (
            "Fixed the token refresh in `auth/session.py`; commit 3f9c2a1b7d4e5f60718293a4b5c6d7e8f9012345. "
            "The test `test_password_reset_sends_mail` passes, coverage is 93%. See https://github.com/acme/app/pull/7."
        )
        assert Redactor().redact(text, where="t") == text


class TestCredentialContext:
    def test_a_high_entropy_value_after_a_credential_name_is_redacted(self) -> None:
        redacted = Redactor().redact('DATABASE_PASSWORD="q8Zr2LmX0vT7wKp4Nc9s"', where="t")

        assert redacted == 'DATABASE_PASSWORD="[redacted: credential]"'

    def test_a_bearer_token_is_redacted(self) -> None:
        redacted = Redactor().redact("Authorization: Bearer 8f3k2LmQ9zR7tW1xV5nB", where="t")

        assert "8f3k2LmQ9zR7tW1xV5nB" not in redacted

    def test_a_plain_word_after_a_credential_name_is_not(self) -> None:
        text = "token_refresh_interval = sixtysecondsdefault"
        assert Redactor().redact(text, where="t") == text

    @given(st.lists(st.sampled_from(CONTEXT_PIECES), max_size=24).map("".join))
    @settings(max_examples=400)
    def test_the_context_is_matched_where_the_expression_alone_matches_it(self, text: str) -> None:
        expected = [(m.start(1), m.end(1)) for m in _IN_CONTEXT.finditer(text)]
        assert [(m.start(1), m.end(1)) for m in _in_context(text, text.lower())] == expected


class TestDrydocksOwnSecrets:
    def test_every_secret_setting_and_crypto_key_is_redacted_by_its_exact_value(self) -> None:
        newest, older = Fernet.generate_key().decode(), Fernet.generate_key().decode()
        settings = Settings(
            slack=SlackSettings(bot_token=SecretStr("plain-looking-bot-token"), signing_secret=SecretStr("signing00")),
            crypto=CryptoSettings(keys=[SecretStr(newest), SecretStr(older)]),
        )
        text = f"values: plain-looking-bot-token, signing00, {older}"

        redacted = Redactor.from_settings(settings).redact(text, where="t")

        assert redacted == (
            "values: [redacted: Drydock's DRYDOCK_SLACK_BOT_TOKEN], "
            "[redacted: Drydock's DRYDOCK_SLACK_SIGNING_SECRET], [redacted: Drydock's DRYDOCK_CRYPTO_KEYS]"
        )

    def test_the_password_in_a_url_setting_is_redacted_wherever_it_appears(self) -> None:
        settings = Settings(redis=RedisSettings(url="redis://drydock:v4lkey%2Fpass@127.0.0.1:6379/0"))

        redacted = Redactor.from_settings(settings).redact("AUTH v4lkey/pass failed", where="t")

        assert redacted == "AUTH [redacted: Drydock's DRYDOCK_REDIS_URL] failed"

    def test_a_runs_own_values_are_added(self) -> None:
        redactor = Redactor().with_values({"grant-0123456789": "sandbox grant"})

        assert redactor.redact("use grant-0123456789 here", where="t") == "use [redacted: Drydock's sandbox grant] here"


class TestNestedValues:
    def test_strings_inside_lists_and_dicts_are_redacted(self) -> None:
        value = {"body": f"token {GITHUB_TOKEN}", "labels": [AWS, "ok"], "number": 7}

        redacted = Redactor().redact_value(value, where="t")

        assert redacted == {
            "body": "token [redacted: GitHub token]",
            "labels": ["[redacted: AWS access key]", "ok"],
            "number": 7,
        }


class TestLogging:
    def test_a_redaction_is_logged_without_the_value(self) -> None:
        with structlog.testing.capture_logs() as logs:
            Redactor().redact(f"x {GITHUB_TOKEN}", where="tool github_comment", thread_id="t-1")

        assert logs == [
            {
                "event": "secret redacted",
                "log_level": "warning",
                "where": "tool github_comment",
                "thread_id": "t-1",
                "kinds": ["GitHub token"],
            }
        ]
        assert GITHUB_TOKEN not in repr(logs)
