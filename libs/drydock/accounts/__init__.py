"""Accounts: linked external accounts, user profiles, team defaults and enabled repositories.

:class:`AccountsStore` is the only code that touches their Redis records; the dashboard
extends it, the ingress reads it to authorize authors and choose repositories.
"""

from drydock.accounts.link_codes import IssuedCode, LinkCodes, Outcome, PendingLink, Redemption
from drydock.accounts.membership import MembershipCache
from drydock.accounts.records import (
    Provider,
    RepositoryBudgets,
    RepositorySettings,
    RoleModel,
    TeamBudgets,
    TeamDefaults,
    UserIdentity,
    UserProfile,
    repository_name,
)
from drydock.accounts.store import AccountsStore, AccountTaken

__all__ = [
    "AccountTaken",
    "AccountsStore",
    "IssuedCode",
    "LinkCodes",
    "MembershipCache",
    "Outcome",
    "PendingLink",
    "Provider",
    "Redemption",
    "RepositoryBudgets",
    "RepositorySettings",
    "RoleModel",
    "TeamBudgets",
    "TeamDefaults",
    "UserIdentity",
    "UserProfile",
    "repository_name",
]
