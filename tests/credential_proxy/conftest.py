"""The credential proxy's tests share the credential tests' fixtures: the fake GitHub with the
Drydock App installed, the upstream git server, and the proxy serving on free loopback ports."""

from tests.credentials.conftest import (
    credential_settings,
    credentials,
    git_upstream,
    github,
    github_app,
    proxy,
    sandbox_home,
    settings_for_sandboxes,
)

__all__ = [
    "credential_settings",
    "credentials",
    "git_upstream",
    "github",
    "github_app",
    "proxy",
    "sandbox_home",
    "settings_for_sandboxes",
]
