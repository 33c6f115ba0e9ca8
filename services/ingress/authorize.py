"""Who may trigger work: the prompt-injection boundary.

An author is trusted when their account is linked to a Drydock user, or (on GitHub) when they
belong to one of the team's allowed organizations: known from the event's
``author_association`` when the repository belongs to that organization, else asked of GitHub
(and cached in Redis for every replica). Bots never trigger work.
"""

from __future__ import annotations

import asyncio

import structlog

from drydock.accounts import MembershipCache, TeamDefaults
from drydock.bus.envelopes import Channel
from drydock.channels.errors import OutboundFailed
from drydock.channels.intents import Sender
from drydock.github import GithubClient

log = structlog.get_logger(__name__)

MEMBER_ASSOCIATIONS = frozenset({"OWNER", "MEMBER"})
MEMBERSHIP_TIMEOUT = 3.0
"""Seconds to wait for GitHub's membership answer; GitHub wants the webhook answered in 10 s."""


class Authorizer:
    def __init__(self, membership: MembershipCache, github: GithubClient | None) -> None:
        self._membership = membership
        self._github = github

    async def refusal(
        self, sender: Sender, user_id: str | None, team: TeamDefaults, repository: str | None
    ) -> str | None:
        """``None`` if ``sender`` may trigger work, else why not (for the log line)."""
        if sender.bot:
            return "the author is a bot"
        if user_id is not None:
            return None
        if sender.channel is not Channel.GITHUB:
            return f"the {sender.channel.value} account is not linked to a Drydock user"
        if not team.allowed_organizations:
            return "the GitHub account is not linked and no organization is allowed"
        owner = repository.split("/", 1)[0].lower() if repository else None
        if owner in team.allowed_organizations and sender.association in MEMBER_ASSOCIATIONS:
            return None
        for org in team.allowed_organizations:
            if await self._is_member(org, sender.name):
                return None
        return "the GitHub account is not linked and not a member of an allowed organization"

    async def _is_member(self, org: str, login: str) -> bool:
        cached = await self._membership.get(org, login)
        if cached is not None:
            return cached
        if self._github is None:
            return False
        try:
            async with asyncio.timeout(MEMBERSHIP_TIMEOUT):
                installation = await self._github.org_installation(org)
                if installation is None:
                    log.warning("membership not checkable: the App is not installed on the organization", org=org)
                    return False
                member = await self._github.is_org_member(installation, org, login)
        except (OutboundFailed, TimeoutError) as error:
            log.warning("membership check failed", org=org, error=getattr(error, "reason", "timeout"))
            return False
        await self._membership.put(org, login, member)
        return member
