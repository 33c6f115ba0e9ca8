"""The GitHub client the channel uses, which lives in :mod:`drydock.github` (re-exported here)."""

from drydock.github import API_VERSION, REACTIONS, USER_AGENT, GithubClient, PullRequestExists, ReactionTarget

__all__ = ["API_VERSION", "REACTIONS", "USER_AGENT", "GithubClient", "PullRequestExists", "ReactionTarget"]
