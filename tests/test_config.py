from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest

from drydock.config import ConfigError, Environment, LogFormat, load_settings


class TestLoadSettings:
    def test_defaults(self, env: pytest.MonkeyPatch) -> None:
        settings = load_settings()
        assert settings.nats.url is None
        assert settings.redis.url is None
        assert settings.environment is Environment.DEVELOPMENT
        assert settings.log_format is LogFormat.CONSOLE

    def test_nested_variables(self, env: pytest.MonkeyPatch) -> None:
        env.setenv("DRYDOCK_NATS_URL", "nats://n1:4222,nats://n2:4222")
        env.setenv("DRYDOCK_REDIS_URL", "redis://r:6379/0")
        env.setenv("DRYDOCK_NATS_RUN_ACK_WAIT", "PT90S")
        env.setenv("DRYDOCK_LEASE_TTL", "45")
        env.setenv("DRYDOCK_ENVIRONMENT", "production")
        settings = load_settings()
        assert settings.nats.url == "nats://n1:4222,nats://n2:4222"
        assert settings.redis.url == "redis://r:6379/0"
        assert settings.nats.run_ack_wait == timedelta(seconds=90)
        assert settings.lease.ttl == timedelta(seconds=45)
        assert settings.log_format is LogFormat.JSON

    def test_data_store_credentials_are_read_and_masked(self, env: pytest.MonkeyPatch) -> None:
        env.setenv("DRYDOCK_NATS_USER", "coder-worker")
        env.setenv("DRYDOCK_NATS_PASSWORD", "nats-pw-7e1c")
        env.setenv("DRYDOCK_NATS_PROVISION", "false")
        env.setenv("DRYDOCK_REDIS_USERNAME", "drydock")
        env.setenv("DRYDOCK_REDIS_PASSWORD", "redis-pw-7e1c")
        settings = load_settings()
        assert settings.nats.user == "coder-worker"
        assert settings.nats.password is not None
        assert settings.nats.password.get_secret_value() == "nats-pw-7e1c"
        assert settings.nats.provision is False
        assert settings.redis.username == "drydock"
        assert "pw-7e1c" not in repr(settings)
        assert "pw-7e1c" not in str(settings.model_dump())

    @pytest.mark.parametrize(
        ("variable", "value", "problem"),
        [
            ("DRYDOCK_NATS_URL", "http://nats:4222", "is not a nats://"),
            ("DRYDOCK_REDIS_URL", "localhost:6379", "is not a redis://"),
            ("DRYDOCK_NATS_REPLICAS", "7", "less than or equal to 5"),
            ("DRYDOCK_LOG_LEVEL", "LOUD", "is not one of"),
            ("DRYDOCK_ENVIRONMENT", "staging", "development"),
            ("DRYDOCK_HTTP_PORT", "eighty", "valid integer"),
            ("DRYDOCK_NATS_USER", "coder worker", "should match pattern"),
        ],
    )
    def test_invalid_values_name_the_variable_and_the_problem(
        self, env: pytest.MonkeyPatch, variable: str, value: str, problem: str
    ) -> None:
        env.setenv(variable, value)
        with pytest.raises(ConfigError) as raised:
            load_settings()
        assert variable in str(raised.value)
        assert problem in str(raised.value)

    def test_every_problem_is_reported_at_once(self, env: pytest.MonkeyPatch) -> None:
        env.setenv("DRYDOCK_NATS_URL", "http://x")
        env.setenv("DRYDOCK_REDIS_URL", "x")
        with pytest.raises(ConfigError) as raised:
            load_settings()
        assert "DRYDOCK_NATS_URL" in str(raised.value)
        assert "DRYDOCK_REDIS_URL" in str(raised.value)


class TestUnisolatedSandboxes:
    def test_are_refused_in_production(self, env: pytest.MonkeyPatch) -> None:
        env.setenv("DRYDOCK_SANDBOX_LOCAL_ALLOW_UNISOLATED", "true")
        assert load_settings().sandbox.local_allow_unisolated
        env.setenv("DRYDOCK_ENVIRONMENT", "production")
        with pytest.raises(ConfigError, match="DRYDOCK_SANDBOX_LOCAL_ALLOW_UNISOLATED is for development"):
            load_settings()

    def test_sharing_the_host_network_is_refused(self, env: pytest.MonkeyPatch) -> None:
        env.setenv("DRYDOCK_SANDBOX_LOCAL_SHARE_NETWORK", "true")
        with pytest.raises(ConfigError, match="local_share_network was removed"):
            load_settings()


class TestStartUpRefusesBadConfiguration:
    def test_cli_exits_2_with_the_message(self) -> None:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("DRYDOCK_")}
        environment["DRYDOCK_NATS_URL"] = "http://wrong"
        result = subprocess.run(
            [sys.executable, "-m", "drydock", "serve", "web"],
            env=environment,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 2
        assert "DRYDOCK_NATS_URL" in result.stderr
        assert "is not a nats://" in result.stderr


class TestDevelopmentPublicUrl:
    def test_follows_the_web_server_s_address_in_development(self, env: pytest.MonkeyPatch) -> None:
        assert load_settings().dashboard.public_url == "http://127.0.0.1:8000"
        env.setenv("DRYDOCK_HTTP_PORT", "8123")
        assert load_settings().dashboard.public_url == "http://127.0.0.1:8123"
        env.setenv("DRYDOCK_HTTP_HOST", "0.0.0.0")
        assert load_settings().dashboard.public_url == "http://127.0.0.1:8123"
        env.setenv("DRYDOCK_HTTP_HOST", "::1")
        assert load_settings().dashboard.public_url == "http://[::1]:8123"

    def test_a_set_url_or_production_is_left_alone(self, env: pytest.MonkeyPatch) -> None:
        env.setenv("DRYDOCK_HTTP_PORT", "8123")
        env.setenv("DRYDOCK_DASHBOARD_PUBLIC_URL", "https://drydock.example/")
        assert load_settings().dashboard.public_url == "https://drydock.example"
        env.delenv("DRYDOCK_DASHBOARD_PUBLIC_URL")
        env.setenv("DRYDOCK_ENVIRONMENT", "production")
        env.setenv("DRYDOCK_DASHBOARD_DEV_LOGIN", "false")
        assert load_settings().dashboard.public_url == "http://127.0.0.1:8000"
