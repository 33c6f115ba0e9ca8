"""The one GitHub client (:class:`GithubClient`), split by area as GitHub's API is: installations
and tokens, issues and comments, pull requests and reviews, checks, repositories, users, GraphQL."""

from drydock.github.client import GithubClient
from drydock.github.installations import Installation
from drydock.github.issues import REACTIONS, ReactionTarget
from drydock.github.pulls import PullRequestExists
from drydock.github.session import API_VERSION, USER_AGENT

__all__ = [
    "API_VERSION",
    "REACTIONS",
    "USER_AGENT",
    "GithubClient",
    "Installation",
    "PullRequestExists",
    "ReactionTarget",
]
