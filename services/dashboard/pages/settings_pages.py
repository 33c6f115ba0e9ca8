"""Settings pages: the profile (and linked accounts), the team defaults and the repositories."""

import re

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError

from drydock.accounts import Provider
from drydock.roles import Role
from services.dashboard.auth.guard import Principal
from services.dashboard.errors import Invalid
from services.dashboard.pages.common import EFFORTS, PageKit, back, field_errors
from services.dashboard.pages.forms import read_form
from services.dashboard.profiles.schemas import LinkCodeOut, ProfileIn
from services.dashboard.profiles.service import Profiles
from services.dashboard.repositories.schemas import RepositoryIn
from services.dashboard.repositories.service import Repositories
from services.dashboard.team.schemas import RoleModelIO, TeamIO
from services.dashboard.team.service import Team


def routes(site: APIRouter, kit: PageKit) -> None:
    dashboard, guard = kit.dashboard, kit.dashboard.guard
    profiles, team, repositories = Profiles(dashboard), Team(dashboard), Repositories(dashboard)

    async def profile_page(
        request: Request,
        principal: Principal,
        errors: dict[str, str],
        status: int = 200,
        link_code: LinkCodeOut | None = None,
    ) -> Response:
        return kit.render(
            request, "profile.html", principal, status, profile=await profiles.get(principal),
            models=list(dashboard.catalog.ids), efforts=EFFORTS,
            errors=errors, link_code=link_code,
        )  # fmt: skip

    def linkable(form_value: str) -> Provider:
        if form_value not in {Provider.SLACK.value, Provider.LINEAR.value}:
            raise Invalid.field(("body", "provider"), "choose slack or linear")
        return Provider(form_value)

    @site.get("/profile")
    async def profile(request: Request) -> Response:
        principal = await kit.signed_in(request)
        return await profile_page(request, principal, {})

    @site.post("/profile")
    async def save_profile(request: Request) -> Response:
        principal = await kit.signed_in(request)
        form = await read_form(request, guard, principal)
        try:
            await profiles.save(
                principal,
                ProfileIn(
                    default_repository=form.optional("default_repository"), model=form.optional("model"),
                    effort=form.optional("effort"), branch_prefix=form.optional("branch_prefix"),
                    draft_prs=form.checked("draft_prs"), auto_open_pr=form.checked("auto_open_pr"),
                    autofix=form.checked("autofix"), plan_approval=form.checked("plan_approval"),
                ),
            )  # fmt: skip
        except Invalid as invalid:
            return await profile_page(request, principal, invalid.by_field(), 422)
        except ValueError as error:
            return await profile_page(request, principal, field_errors(error), 422)
        return back("/profile", "Profile saved.")

    @site.post("/profile/link-codes")
    async def start_link(request: Request) -> Response:
        principal = await kit.signed_in(request)
        form = await read_form(request, guard, principal)
        code = await profiles.start_link(principal, linkable(form.text("provider")))
        return await profile_page(request, principal, {}, 201, link_code=code)

    @site.post("/profile/link-codes/cancel")
    async def cancel_link(request: Request) -> Response:
        principal = await kit.signed_in(request)
        form = await read_form(request, guard, principal)
        provider = linkable(form.text("provider"))
        await profiles.cancel_link(principal, provider)
        return back("/profile", f"Withdrew the pending {provider.value} link.")

    @site.post("/profile/identities/remove")
    async def unlink_identity(request: Request) -> Response:
        principal = await kit.signed_in(request)
        form = await read_form(request, guard, principal)
        try:
            provider = Provider(form.text("provider"))
        except ValueError:
            raise Invalid.field(("body", "provider"), "choose slack or linear") from None
        await profiles.unlink(principal, provider, form.text("external_id"))
        return back("/profile", f"Unlinked your {provider.value} account.")

    # Team defaults

    async def team_page(
        request: Request, principal: Principal, values: TeamIO, errors: dict[str, str], status: int = 200
    ) -> Response:
        return kit.render(
            request, "team.html", principal, status, team=values, roles=[role.value for role in Role],
            models=list(dashboard.catalog.ids), efforts=EFFORTS,
            errors=errors,
        )  # fmt: skip

    @site.get("/team")
    async def team_defaults(request: Request) -> Response:
        principal = await kit.signed_in(request)
        return await team_page(request, principal, await team.get(), {})

    @site.post("/team")
    async def save_team(request: Request) -> Response:
        principal = await kit.administrator(request)
        form = await read_form(request, guard, principal)
        try:
            change = TeamIO(
                default_repository=form.optional("default_repository"),
                allowed_organizations=[org for org in re.split(r"[\s,]+", form.text("allowed_organizations")) if org],
                mention_handle=form.optional("mention_handle"),
                models={
                    role: RoleModelIO(model=form.optional(f"{role}_model"), effort=form.optional(f"{role}_effort"))
                    for role in Role
                },
            )  # fmt: skip
            await team.save(change)
        except Invalid as invalid:
            return await team_page(request, principal, await team.get(), invalid.by_field(), 422)
        except ValueError as error:
            return await team_page(request, principal, await team.get(), field_errors(error), 422)
        return back("/team", "Team defaults saved.")

    # Repositories

    @site.get("/repositories")
    async def repository_list(request: Request) -> Response:
        principal = await kit.administrator(request)
        return kit.render(request, "repositories.html", principal, listing=await repositories.listing())

    @site.post("/repositories/{owner}/{name}")
    async def save_repository(request: Request, owner: str, name: str) -> Response:
        principal = await kit.administrator(request)
        form = await read_form(request, guard, principal)
        if not form.checked("enabled"):
            await repositories.disable(owner, name)
            return back("/repositories", f"{owner}/{name} disabled.")
        paths = [line.strip() for line in form.text("protected_paths").replace(",", "\n").splitlines()]
        try:
            change = RepositoryIn(
                coder=form.checked("coder"), reviewer=form.checked("reviewer"), autofix=form.checked("autofix"),
                plan_approval=form.checked("plan_approval"), protected_paths=[p for p in paths if p],
            )  # fmt: skip
        except ValidationError as error:
            raise Invalid.from_validation(error) from None
        saved = await repositories.enable(owner, name, change)
        return back("/repositories", f"{saved.full_name} saved.")
