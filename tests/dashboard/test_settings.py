"""``DRYDOCK_DASHBOARD_*``: what the dashboard is configured with, refused once at start-up when wrong."""

from __future__ import annotations

import pytest

from drydock.config import ConfigError, load_settings


class TestDashboardSettings:
    def test_lists_come_as_json_and_teams_are_normalized(self, env: pytest.MonkeyPatch) -> None:
        env.setenv("DRYDOCK_DASHBOARD_ADMIN_LOGINS", '["ada", "grace"]')
        env.setenv("DRYDOCK_DASHBOARD_ADMIN_TEAMS", '["Acme/Platform"]')
        dashboard = load_settings().dashboard
        assert (dashboard.admin_logins, dashboard.admin_teams) == (["ada", "grace"], ["acme/platform"])

    @pytest.mark.parametrize(
        ("variable", "value", "message"),
        [
            ("DRYDOCK_DASHBOARD_ADMIN_TEAMS", '["platform"]', "org/team-slug"),
            ("DRYDOCK_DASHBOARD_PUBLIC_URL", "dock.example.com", "not an http:// or https:// URL"),
            ("DRYDOCK_DASHBOARD_GITHUB_CLIENT_ID", "Iv1.x", "DRYDOCK_DASHBOARD_GITHUB_CLIENT_SECRET"),
            ("DRYDOCK_DASHBOARD_OIDC_ISSUER", "https://id.example.com", "DRYDOCK_DASHBOARD_OIDC_CLIENT_ID"),
        ],
    )
    def test_wrong_values_are_named(self, env: pytest.MonkeyPatch, variable: str, value: str, message: str) -> None:
        env.setenv(variable, value)
        with pytest.raises(ConfigError, match=message):
            load_settings()

    def test_the_development_login_is_on_by_default_in_development_only(self, env: pytest.MonkeyPatch) -> None:
        dashboard = load_settings().dashboard
        assert dashboard.dev_login is True
        assert dashboard.cookie_secure is True
        env.setenv("DRYDOCK_ENVIRONMENT", "production")
        assert load_settings().dashboard.dev_login is False

    def test_the_development_login_stops_a_production_start(self, env: pytest.MonkeyPatch) -> None:
        env.setenv("DRYDOCK_ENVIRONMENT", "production")
        env.setenv("DRYDOCK_DASHBOARD_DEV_LOGIN", "true")
        with pytest.raises(ConfigError, match="DRYDOCK_DASHBOARD_DEV_LOGIN: the development sign-in"):
            load_settings()
