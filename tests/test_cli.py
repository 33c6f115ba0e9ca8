from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from drydock.config import Settings, load_settings, unknown_variables
from drydock.configuration_report import configuration_report, missing


def _drydock(*argv: str, **variables: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DRYDOCK_")} | variables
    return subprocess.run(
        [sys.executable, "-m", "drydock", *argv],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class TestStartUpMistakes:
    """Each mistake is one line on stderr naming the variable and the fix, and exit code 2."""

    @pytest.mark.parametrize(
        ("variables", "argv", "expected"),
        [
            ({"DRYDOCK_CRYPTO_KEYS": "notjson"}, ("serve", "web"), "DRYDOCK_CRYPTO_KEYS: not valid JSON"),
            (
                {"DRYDOCK_CRYPTO_KEYS": '["not-a-key"]'},
                ("serve", "web"),
                "DRYDOCK_CRYPTO_KEYS: key #1 is not a Fernet key",
            ),
            (
                {"DRYDOCK_MODELS_EXTRA_MODELS": "bad"},
                ("serve", "coder-worker"),
                "DRYDOCK_MODELS_EXTRA_MODELS: not valid JSON",
            ),
            (
                {"DRYDOCK_MODELS_DEFAULT": "llama3", "DRYDOCK_MODELS_BASE_URL": "http://127.0.0.1:9/v1"},
                ("serve", "coder-worker"),
                """DRYDOCK_MODELS_EXTRA_MODELS='{"llama3": []}'""",
            ),
            ({}, ("serve", "no-such-service"), "unknown service 'no-such-service'; available: analyzer-worker"),
            ({}, ("serve", "web"), "DRYDOCK_NATS_URL and DRYDOCK_REDIS_URL not set: `drydock serve` runs one"),
            (
                {"DRYDOCK_NATS_URL": "nats://127.0.0.1:9"},
                ("serve", "web"),
                "DRYDOCK_REDIS_URL not set: `drydock serve` runs one service against NATS and Redis that run "
                "elsewhere; `pdm run dev` starts embedded ones",
            ),
        ],
    )
    def test_one_line_and_exit_code_2(self, variables: dict[str, str], argv: tuple[str, ...], expected: str) -> None:
        result = _drydock(*argv, **variables)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert expected in lines[0]

    def test_a_port_in_use_names_the_setting(self, settings: Settings) -> None:
        assert settings.nats.url is not None
        assert settings.redis.url is not None
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            result = _drydock(
                "serve",
                "web",
                DRYDOCK_NATS_URL=settings.nats.url,
                DRYDOCK_REDIS_URL=settings.redis.url,
                DRYDOCK_HTTP_PORT=str(port),
            )
        assert result.returncode == 2, result.stderr
        last = result.stderr.strip().splitlines()[-1]
        assert f"cannot listen on 127.0.0.1:{port}" in last
        assert "DRYDOCK_HTTP_PORT" in last
        assert "Traceback" not in result.stderr


class TestUnknownVariables:
    def test_a_misspelled_variable_gets_the_closest_name(self) -> None:
        found = unknown_variables({"DRYDOCK_NATS_UR": "x", "DRYDOCK_MODELS_DEFAULT": "gpt-5.1", "HOME": "/"})
        assert found == [("DRYDOCK_NATS_UR", "DRYDOCK_NATS_URL")]

    def test_sandbox_and_test_variables_are_not_settings(self) -> None:
        assert unknown_variables({"DRYDOCK_SANDBOX_ID": "sbx-1", "DRYDOCK_TEST_CHROMIUM": "/usr/bin/chromium"}) == []

    def test_the_warning_is_logged_at_start_up(self) -> None:
        result = _drydock("serve", "web", DRYDOCK_REDIS_UTL="redis://x", DRYDOCK_NATS_URL="nats://127.0.0.1:9")
        assert "DRYDOCK_REDIS_UTL" in result.stderr
        assert "DRYDOCK_REDIS_URL" in result.stderr


class TestServeHelp:
    def test_lists_every_service_with_a_line(self) -> None:
        result = _drydock("serve", "--help")
        assert result.returncode == 0
        for name in ("web", "ingress", "dashboard", "credential-proxy", "coder-worker", "autofix-controller"):
            assert any(line.strip().startswith(name + " ") for line in result.stdout.splitlines()), name


class TestConfigCheck:
    def test_masks_secrets_and_names_what_is_missing(self, env: pytest.MonkeyPatch) -> None:
        env.setenv("DRYDOCK_SLACK_BOT_TOKEN", "xoxb-very-secret")
        env.setenv("DRYDOCK_REDIS_URL", "redis://drydock:hunter2@127.0.0.1:6379/0")
        report = configuration_report(load_settings())
        assert "xoxb-very-secret" not in report
        assert "hunter2" not in report
        assert "DRYDOCK_SLACK_BOT_TOKEN=**********" in report
        assert "DRYDOCK_REDIS_URL=redis://drydock:**********@127.0.0.1:6379/0" in report
        assert "DRYDOCK_MODELS_API_KEY (OpenAI) or DRYDOCK_MODELS_BASE_URL" in report

    def test_nothing_missing_when_everything_is_set(self, env: pytest.MonkeyPatch) -> None:
        settings = load_settings(
            models={"api_key": "k"},
            crypto={"keys": ["x" * 43 + "="]},
            github={"app_id": 1, "private_key": "pem", "webhook_secret": "s"},
            slack={"bot_token": "t", "signing_secret": "s"},
            linear={"api_key": "k", "webhook_secret": "s"},
            dashboard={"dev_login": True},
        )
        assert missing(settings) == []

    def test_the_command_prints_it(self) -> None:
        result = _drydock("config", "check", DRYDOCK_GITHUB_WEBHOOK_SECRET="whsec-value")
        assert result.returncode == 0
        assert "DRYDOCK_GITHUB_WEBHOOK_SECRET=**********" in result.stdout
        assert "whsec-value" not in result.stdout
        assert "not configured:" in result.stdout
