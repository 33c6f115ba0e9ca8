"""A person's own profile: model and effort override, default repository, branch prefix, pull
request flags, and linked Slack and Linear accounts.

A Slack or Linear account links only with proof that the person controls it: the profile issues
a one-time code (:mod:`drydock.accounts.link_codes`) which the person sends to the bot from that
account, and the ingress links the account that sent it. Until then the link is pending and
confers nothing. Nobody links an account by typing its id.
"""

from __future__ import annotations

from pydantic import ValidationError

from drydock.accounts import IssuedCode, Provider, UserProfile
from services.dashboard.auth.guard import Principal
from services.dashboard.choices import blank_to_none, model_errors
from services.dashboard.context import Dashboard
from services.dashboard.errors import Invalid, NotFound
from services.dashboard.profiles.schemas import Identity, LinkCodeOut, PendingLink, ProfileIn, ProfileOut


class Profiles:
    def __init__(self, dashboard: Dashboard) -> None:
        self._accounts = dashboard.accounts
        self._codes = dashboard.link_codes
        self._catalog = dashboard.catalog
        self._default_handle = dashboard.settings.ingress.mention_handle

    async def get(self, principal: Principal) -> ProfileOut:
        profile = await self._accounts.profile(principal.user_id)
        linked = await self._accounts.accounts_of(principal.user_id)
        pending = await self._codes.pending(principal.user_id)
        return ProfileOut(
            **profile.model_dump(exclude={"user_id"}),
            user_id=principal.user_id,
            identities=[Identity(provider=provider, external_id=external_id) for provider, external_id in linked],
            pending=[
                PendingLink.model_validate({"provider": link.provider, "expires_at": link.expires_at})
                for link in pending
            ],
        )

    async def save(self, principal: Principal, change: ProfileIn) -> ProfileOut:
        """Replace the profile; :class:`Invalid` names each wrong field."""
        model, effort = blank_to_none(change.model), blank_to_none(change.effort)
        errors = model_errors(self._catalog, model, effort, at=("body",))
        try:
            profile = UserProfile(
                user_id=principal.user_id,
                default_repository=blank_to_none(change.default_repository),
                model=model,
                effort=effort,
                branch_prefix=blank_to_none(change.branch_prefix),
                draft_prs=change.draft_prs,
                auto_open_pr=change.auto_open_pr,
                autofix=change.autofix,
                plan_approval=change.plan_approval,
            )
        except ValidationError as error:
            raise Invalid([*errors, *Invalid.from_validation(error).errors]) from None
        if errors:
            raise Invalid(errors)
        await self._accounts.save_profile(profile)
        return await self.get(principal)

    async def start_link(self, principal: Principal, provider: Provider) -> LinkCodeOut:
        """A new link code for a Slack or Linear account, and where to send it."""
        issued = await self._codes.issue(principal.user_id, provider)
        handle = (await self._accounts.team()).mention_handle or self._default_handle
        return LinkCodeOut.model_validate(
            {
                "provider": provider,
                "code": issued.code,
                "expires_at": issued.expires_at,
                "instructions": instructions(issued, handle),
            }
        )

    async def cancel_link(self, principal: Principal, provider: Provider) -> None:
        """Withdraw the pending link; :class:`NotFound` if there is none."""
        if provider is Provider.GITHUB or not await self._codes.cancel(principal.user_id, provider):
            raise NotFound(f"no pending {provider.value} link")

    async def unlink(self, principal: Principal, provider: Provider, external_id: str) -> None:
        """Remove one of the person's own links; :class:`NotFound` if they have no such link."""
        if provider is Provider.GITHUB:
            raise Invalid.field(("path", "provider"), "the GitHub account is the one you sign in with")
        if (provider, external_id) not in await self._accounts.accounts_of(principal.user_id):
            raise NotFound(f"no linked {provider.value} account {external_id}")
        await self._accounts.unlink(provider, external_id)


def instructions(issued: IssuedCode, handle: str) -> str:
    """Where to send ``issued`` from the account to link, in words."""
    command = f"link {issued.code}"
    if issued.provider is Provider.SLACK:
        return (
            f"In Slack, signed in as the account to link, send {command} to {handle} in a direct message, "
            f"or mention it in a channel: {handle} {command}"
        )
    return f"In Linear, signed in as the account to link, comment on any issue: {handle} {command}"
