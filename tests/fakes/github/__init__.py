"""A faithful test double of the GitHub REST API (see :mod:`tests.fakes.github.server`)."""

from tests.fakes.github.server import ROUTERS, FakeGithub
from tests.fakes.github.state import App, GithubState, Installation, InstallationToken, Repository, SeenRequest

__all__ = [
    "ROUTERS",
    "App",
    "FakeGithub",
    "GithubState",
    "Installation",
    "InstallationToken",
    "Repository",
    "SeenRequest",
]
