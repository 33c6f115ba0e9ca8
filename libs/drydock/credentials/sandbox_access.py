"""What a sandbox is given to reach the code host through the credential proxy.

The grant travels in the proxy URL's path (``{proxy}/g/{grant}/git/…`` and ``…/api``), so every
client works unchanged whatever token it sends: git through ``url.<proxy>.insteadOf`` rules,
API clients through ``GITHUB_API_URL``. Token variables hold only the placeholder
``proxy-injected``; the proxy replaces whatever credential a request carries. Other traffic
goes through the egress proxy (``HTTPS_PROXY``), which knows the sandbox by the same grant.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from drydock.config import CredentialProxySettings, GithubSettings

PLACEHOLDER = "proxy-injected"
GRANT_PATH = "g"
EGRESS_USER = "drydock"


@dataclass(frozen=True)
class SandboxAccess:
    environment: dict[str, str]
    git_config: tuple[tuple[str, str], ...]
    api_base_url: str


def git_base(proxy_url: str, grant_token: str) -> str:
    return f"{proxy_url}/{GRANT_PATH}/{grant_token}/git/"


def api_base(proxy_url: str, grant_token: str) -> str:
    return f"{proxy_url}/{GRANT_PATH}/{grant_token}/api"


def _with_userinfo(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{parts.netloc}"))


def sandbox_access(proxy: CredentialProxySettings, github: GithubSettings, grant_token: str) -> SandboxAccess:
    """The environment and git configuration that route a sandbox's code host traffic through
    the proxy under ``grant_token``; nothing in it is a real credential."""
    git = git_base(proxy.url, grant_token)
    api = api_base(proxy.url, grant_token)
    egress = _with_userinfo(proxy.egress_url, EGRESS_USER, grant_token)
    bypass = ",".join(dict.fromkeys([urlsplit(proxy.url).hostname or "", "localhost", "127.0.0.1", "::1"]))
    environment = {
        "GH_TOKEN": PLACEHOLDER,
        "GITHUB_TOKEN": PLACEHOLDER,
        "GITHUB_API_URL": api,
        "GIT_TERMINAL_PROMPT": "0",
        "HTTP_PROXY": egress,
        "HTTPS_PROXY": egress,
        "http_proxy": egress,
        "https_proxy": egress,
        "NO_PROXY": bypass,
        "no_proxy": bypass,
    }
    rewrite = f"url.{git}.insteadOf"
    git_config = tuple(
        (rewrite, prefix)
        for prefix in (
            f"https://{github.host}/",
            f"http://{github.host}/",
            f"ssh://git@{github.host}/",
            f"git@{github.host}:",
        )
    )
    return SandboxAccess(environment, git_config, api)
