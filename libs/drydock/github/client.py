"""The one GitHub client: every area's methods on one object, sharing one githubkit ``GitHub``,
one connection pool and the App's installation tokens."""

from __future__ import annotations

from drydock.github.checks import Checks
from drydock.github.graphql import Graphql
from drydock.github.hook_deliveries import HookDeliveries
from drydock.github.issues import Issues
from drydock.github.pulls import Pulls
from drydock.github.repos import Repositories
from drydock.github.users import Users


class GithubClient(Issues, Pulls, Checks, Repositories, Users, Graphql, HookDeliveries):
    """The GitHub REST and GraphQL APIs as the Drydock App (installations and tokens, issues and
    comments, pull requests and reviews, checks, repositories, users, GraphQL, the App's webhook
    deliveries), each area in its own module of :mod:`drydock.github`. Methods taking
    ``installation_id`` act as the App's installation; methods taking ``authorization`` send the
    caller's header (a user's token or :meth:`app_authorization`). Failures are
    :class:`~drydock.errors.OutboundFailed` with GitHub's status (``None`` when unreachable)."""
