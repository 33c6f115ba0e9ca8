from __future__ import annotations

from drydock.config import load_settings
from drydock.credentials import PLACEHOLDER, sandbox_access

GRANT = "dgr_" + "x" * 43


class TestSandboxAccess:
    def test_git_traffic_for_the_code_host_is_rewritten_to_the_proxy(self) -> None:
        settings = load_settings(proxy={"url": "http://proxy.drydock:8081"}, github={"host": "ghe.example.com"})
        access = sandbox_access(settings.proxy, settings.github, GRANT)
        rewrite = f"url.http://proxy.drydock:8081/g/{GRANT}/git/.insteadOf"
        assert set(access.git_config) == {
            (rewrite, "https://ghe.example.com/"),
            (rewrite, "http://ghe.example.com/"),
            (rewrite, "ssh://git@ghe.example.com/"),
            (rewrite, "git@ghe.example.com:"),
        }

    def test_environment_holds_placeholders_addresses_and_the_grant_only(self) -> None:
        settings = load_settings(proxy={"url": "http://proxy:8081", "egress_url": "http://proxy:8082"})
        access = sandbox_access(settings.proxy, settings.github, GRANT)
        env = access.environment
        assert env["GH_TOKEN"] == env["GITHUB_TOKEN"] == PLACEHOLDER
        assert env["GITHUB_API_URL"] == access.api_base_url == f"http://proxy:8081/g/{GRANT}/api"
        assert env["HTTPS_PROXY"] == env["https_proxy"] == f"http://drydock:{GRANT}@proxy:8082"
        assert "proxy" in env["NO_PROXY"].split(",")
        assert env["GIT_TERMINAL_PROMPT"] == "0"
