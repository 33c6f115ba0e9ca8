"""Settings pages: the profile (and linked accounts), the team defaults and the repositories."""

import re

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError

from drydock.accounts import Provider
from drydock.accounts.link_codes import LINKABLE
from drydock.roles import Role
from services.dashboard.auth.guard import Principal
from services.dashboard.budgets.schemas import RepositoryBudgetsIO, TeamBudgetsIO
from services.dashboard.errors import Invalid
from services.dashboard.pages.common import EFFORTS, PageKit, back, field_errors, form_errors
from services.dashboard.pages.forms import read_form
from services.dashboard.profiles.schemas import LinkCodeOut, ProfileIn
from services.dashboard.profiles.service import Profiles
from services.dashboard.repositories.schemas import RepositoryAdd, RepositoryIn
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
        values: dict[str, str] | None = None,
    ) -> Response:
        return kit.render(
            request, "profile.html", principal, status, profile=await profiles.get(principal),
            models=list(dashboard.catalog.ids), efforts=EFFORTS,
            errors=errors, link_code=link_code, values=values or {},
        )  # fmt: skip

    def linkable(form_value: str) -> Provider:
        if form_value not in {provider.value for provider in LINKABLE}:
            raise Invalid.field(("body", "provider"), f"choose {' or '.join(provider.value for provider in LINKABLE)}")
        return Provider(form_value)

    @site.get("/profile")
    async def profile(request: Request) -> Response:
        principal = await kit.signed_in(request)
        return await profile_page(request, principal, {})

    @site.post("/profile")
    async def save_profile(request: Request) -> Response:
        principal = await kit.signed_in(request)
        form = await read_form(request, guard, principal)
        typed = {name: form.text(name) for name in ("default_repository", "model", "effort", "branch_prefix")} | {
            name: "1" if form.checked(name) else "" for name in ("draft_prs", "auto_open_pr", "autofix")
        }
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
            return await profile_page(request, principal, form_errors(invalid), 422, values=typed)
        except ValueError as error:
            return await profile_page(request, principal, field_errors(error), 422, values=typed)
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

    async def team_page(
        request: Request,
        principal: Principal,
        errors: dict[str, str],
        status: int = 200,
        typed: dict[str, str] | None = None,
    ) -> Response:
        saved = await team.get()
        values = {
            "allowed_organizations": " ".join(saved.allowed_organizations),
            "mention_handle": saved.mention_handle or "",
            "default_repository": saved.default_repository or "",
        }
        for role in Role:
            choice = saved.models.get(role)
            values[f"{role}_model"] = (choice.model if choice else None) or ""
            values[f"{role}_effort"] = (choice.effort if choice else None) or ""
        for name in TeamBudgetsIO.model_fields:
            limit = getattr(saved.budgets, name)
            values[f"budget_{name}"] = "" if limit is None else str(limit)
        return kit.render(
            request, "team.html", principal, status, values=values | (typed or {}), roles=[role.value for role in Role],
            models=list(dashboard.catalog.ids), efforts=EFFORTS,
            errors=errors,
        )  # fmt: skip

    @site.get("/team")
    async def team_defaults(request: Request) -> Response:
        principal = await kit.signed_in(request)
        return await team_page(request, principal, {})

    @site.post("/team")
    async def save_team(request: Request) -> Response:
        principal = await kit.administrator(request)
        form = await read_form(request, guard, principal)
        typed = {
            name: form.text(name)
            for name in (
                "allowed_organizations", "mention_handle", "default_repository",
                *(f"{role}_{part}" for role in Role for part in ("model", "effort")),
                *(f"budget_{name}" for name in TeamBudgetsIO.model_fields),
            )
        }  # fmt: skip
        try:
            change = TeamIO(
                default_repository=form.optional("default_repository"),
                allowed_organizations=[org for org in re.split(r"[\s,]+", form.text("allowed_organizations")) if org],
                mention_handle=form.optional("mention_handle"),
                models={
                    role: RoleModelIO(model=form.optional(f"{role}_model"), effort=form.optional(f"{role}_effort"))
                    for role in Role
                },
                budgets=TeamBudgetsIO.model_validate(
                    {name: form.optional(f"budget_{name}") for name in TeamBudgetsIO.model_fields}
                ),
            )  # fmt: skip
            await team.save(change)
        except Invalid as invalid:
            return await team_page(request, principal, form_errors(invalid), 422, typed)
        except ValueError as error:
            return await team_page(request, principal, field_errors(error), 422, typed)
        return back("/team", "Team defaults saved.")

    async def repositories_page(
        request: Request, principal: Principal, errors: dict[str, str], values: dict[str, str], status: int = 200
    ) -> Response:
        if not principal.admin:
            return kit.render(
                request, "repositories.html", principal, status, listing=None,
                administrators=dashboard.settings.dashboard.admin_logins, errors={}, values={}, app=False,
            )  # fmt: skip
        return kit.render(
            request, "repositories.html", principal, status, listing=await repositories.listing(),
            administrators=[], errors=errors, values=values, app=dashboard.installations.configured,
        )  # fmt: skip

    @site.get("/repositories")
    async def repository_list(request: Request) -> Response:
        principal = await kit.signed_in(request)
        return await repositories_page(request, principal, {}, {})

    @site.post("/repositories")
    async def add_repository(request: Request) -> Response:
        principal = await kit.administrator(request)
        form = await read_form(request, guard, principal)
        values = {"full_name": form.text("full_name")} | {
            toggle: "1" if form.checked(toggle) else "" for toggle in ("coder", "reviewer", "autofix")
        }
        try:
            change = RepositoryAdd(
                full_name=values["full_name"], coder=form.checked("coder"), reviewer=form.checked("reviewer"),
                autofix=form.checked("autofix"),
            )  # fmt: skip
            saved = await repositories.add(change)
        except Invalid as invalid:
            return await repositories_page(request, principal, form_errors(invalid), values, 422)
        except ValueError as error:
            return await repositories_page(request, principal, field_errors(error), values, 422)
        return back("/repositories", f"{saved.full_name} enabled.")

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
                budgets=RepositoryBudgetsIO.model_validate(
                    {name: form.optional(f"budget_{name}") for name in RepositoryBudgetsIO.model_fields}
                ),
            )  # fmt: skip
        except ValidationError as error:
            raise Invalid.from_validation(error) from None
        saved = await repositories.enable(owner, name, change)
        return back("/repositories", f"{saved.full_name} saved.")
