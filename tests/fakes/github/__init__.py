"""A faithful test double of the GitHub REST API (see :mod:`tests.fakes.github.server`)."""

from tests.fakes.github.server import ROUTERS, FakeGitHub
from tests.fakes.github.state import App, GitHubState, Installation, InstallationToken, Repository, SeenRequest

__all__ = [
    "ROUTERS",
    "App",
    "FakeGitHub",
    "GitHubState",
    "Installation",
    "InstallationToken",
    "Repository",
    "SeenRequest",
]
