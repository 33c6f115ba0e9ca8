"""A person's own profile: model and effort override, default repository, branch prefix, pull
request flags, and linked Slack and Linear accounts.

Linking an account is a claim: a person may link a Slack or Linear account that nobody else
has linked (409 otherwise), and the ingress then trusts that account as them. Nothing proves the
claim beyond that (Slack and Linear sign-in are not part of the dashboard), so an account someone
else linked first must be unlinked by them before it can move.
"""

from __future__ import annotations

from pydantic import ValidationError

from drydock.accounts import AccountTaken, Provider, UserProfile
from services.dashboard.auth.guard import Principal
from services.dashboard.choices import blank_to_none, model_errors
from services.dashboard.context import Dashboard
from services.dashboard.errors import Conflict, Invalid, NotFound
from services.dashboard.profiles.schemas import Identity, IdentityIn, ProfileIn, ProfileOut


class Profiles:
    def __init__(self, dashboard: Dashboard) -> None:
        self._accounts = dashboard.accounts
        self._catalog = dashboard.catalog

    async def get(self, principal: Principal) -> ProfileOut:
        profile = await self._accounts.profile(principal.user_id)
        linked = await self._accounts.accounts_of(principal.user_id)
        return ProfileOut(
            **profile.model_dump(exclude={"user_id"}),
            user_id=principal.user_id,
            identities=[Identity(provider=provider.value, external_id=external_id) for provider, external_id in linked],
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
            )
        except ValidationError as error:
            raise Invalid([*errors, *Invalid.from_validation(error).errors]) from None
        if errors:
            raise Invalid(errors)
        await self._accounts.save_profile(profile)
        return await self.get(principal)

    async def link(self, principal: Principal, identity: IdentityIn) -> ProfileOut:
        try:
            await self._accounts.link_if_free(Provider(identity.provider), identity.external_id, principal.user_id)
        except AccountTaken as error:
            raise Conflict(str(error)) from None
        except ValueError as error:
            raise Invalid.field(("body", "external_id"), str(error)) from None
        return await self.get(principal)

    async def unlink(self, principal: Principal, provider: Provider, external_id: str) -> None:
        """Remove one of the person's own links; :class:`NotFound` if they have no such link."""
        if provider is Provider.GITHUB:
            raise Invalid.field(("path", "provider"), "the GitHub account is the one you sign in with")
        if (provider, external_id) not in await self._accounts.accounts_of(principal.user_id):
            raise NotFound(f"no linked {provider.value} account {external_id}")
        await self._accounts.unlink(provider, external_id)
