"""Signing in and out: the sign-in page, GitHub OAuth and OpenID Connect (start and callback),
the development login (and its one-time links), sign-out, and ``GET /api/v1/me``.

Each sign-in ends the same way (:meth:`SignIn.complete`): the person's Drydock user (the one
their GitHub account is linked to, else a new one linked to it), their identity for display,
whether they are an administrator (``admin_logins``, ``admin_teams``, ``admin_groups``, decided
at sign-in), a new session, and a redirect to where they were going (a local path only).

GitHub sign-in admits administrators and active members of the team's allowed organizations
(asked of GitHub with the person's own token); with no organization allowed, administrators only.
Anyone else gets a 403 page saying why, and no Drydock user, token or session is made for them.
"""

import hmac
import re
import secrets
from typing import Annotated
from urllib.parse import quote

import structlog
from fastapi import APIRouter, Depends, Form, Query, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import BaseModel

from drydock.accounts import AccountTaken, Provider, UserIdentity
from services.dashboard.auth import pkce
from services.dashboard.auth.dev_links import redeem_dev_link
from services.dashboard.auth.github import GithubSignIn, SignInRefused
from services.dashboard.auth.guard import CSRF_FIELD, Principal
from services.dashboard.context import Dashboard
from services.dashboard.errors import DashboardError, Forbidden, NotFound, responses
from services.dashboard.pages.rendering import Pages

log = structlog.get_logger(__name__)

DEV_LOGIN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,38}$"
DEV_LOGIN_RULE = "a login is 1 to 39 letters, digits, '.', '_' or '-', starting with a letter or digit"
ATTEMPT_GONE = "This sign-in expired, was already used or was begun in another browser. Sign in again."


class Me(BaseModel):
    user_id: str
    login: str
    name: str
    provider: str
    admin: bool
    csrf_token: str
    """Send it as X-CSRF-Token with every state-changing request."""


def local_path(target: str | None) -> str:
    """``target`` if it is a path on this site, else ``/threads`` (no open redirects)."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")) or "\n" in target:
        return "/threads"
    return target


class SignIn:
    def __init__(self, dashboard: Dashboard) -> None:
        self._d = dashboard
        settings = dashboard.settings.dashboard
        self._admin_logins = {login.lower() for login in settings.admin_logins}
        self._admin_teams = set(settings.admin_teams)
        self._admin_groups = set(settings.admin_groups)

    def is_admin(
        self, login: str, *, teams: set[str] | frozenset[str] = frozenset(), groups: frozenset[str] = frozenset()
    ) -> bool:
        return (
            login.lower() in self._admin_logins or bool(teams & self._admin_teams) or bool(groups & self._admin_groups)
        )

    async def complete(self, identity: UserIdentity, *, admin: bool, target: str) -> Response:
        await self._d.accounts.save_identity(identity)
        token, _ = await self._d.sessions.create(
            user_id=identity.user_id,
            provider=identity.provider,
            login=identity.login,
            name=identity.name,
            avatar_url=identity.avatar_url,
            admin=admin,
        )
        response = RedirectResponse(local_path(target), status_code=303)
        self._d.guard.set_session_cookie(response, token)
        log.info("signed in", user_id=identity.user_id, provider=identity.provider, admin=admin)
        return response

    async def github_refusal(self, github: GithubSignIn, token: str, login: str) -> str | None:
        """Why a GitHub account that is not an administrator may not sign in; ``None`` if it may."""
        allowed = (await self._d.accounts.team()).allowed_organizations
        if not allowed:
            return (
                "Only Drydock administrators may sign in: no GitHub organization is allowed yet "
                "(an administrator sets the allowed organizations on the Team page)."
            )
        for org in allowed:
            if await github.is_member(token, org):
                return None
        return (
            f"{login} is not a member of {', '.join(allowed)}, the GitHub organizations allowed to use this "
            "Drydock. Ask an administrator to add you, then sign in again."
        )

    async def github_user(self, github_id: int) -> str:
        """The Drydock user of a GitHub account: the one it is linked to, else a new one."""
        existing = await self._d.accounts.user_for(Provider.GITHUB, str(github_id))
        if existing is not None:
            return existing
        user_id = f"gh-{github_id}"
        try:
            await self._d.accounts.link_if_free(Provider.GITHUB, str(github_id), user_id)
        except AccountTaken:
            found = await self._d.accounts.user_for(Provider.GITHUB, str(github_id))
            assert found is not None
            return found
        return user_id


def routers(dashboard: Dashboard, pages: Pages) -> list[APIRouter]:
    guard = dashboard.guard
    signin = SignIn(dashboard)
    site = APIRouter(route_class=dashboard.page_route(pages.error), include_in_schema=False)
    api = APIRouter(prefix="/api/v1", tags=["session"], route_class=dashboard.api_route)

    def refused(request: Request, message: str, status: int = 400) -> Response:
        return pages.render(
            request, "login.html", status=status, error=message, methods=_methods(dashboard), target="/threads",
            login_token="",
        )  # fmt: skip

    @site.get("/login")
    async def login_page(request: Request, next: str | None = None) -> Response:
        if await guard.optional(request) is not None:
            return RedirectResponse(local_path(next), status_code=303)
        token = guard.browser(request)
        response = pages.render(
            request, "login.html", error="", methods=_methods(dashboard), target=local_path(next), login_token=token
        )
        guard.set_login_cookie(response, token)
        return response

    @site.get("/auth/github")
    async def github_start(request: Request, next: str | None = None) -> Response:
        if dashboard.github is None:
            raise NotFound("GitHub sign-in is not configured")
        verifier, browser = pkce.verifier(), guard.browser(request)
        state = await dashboard.logins.start(browser, provider="github", verifier=verifier, target=local_path(next))
        response = RedirectResponse(dashboard.github.authorize_url(state, pkce.challenge(verifier)), status_code=302)
        guard.set_login_cookie(response, browser)
        return response

    @site.get("/auth/github/callback")
    async def github_callback(
        request: Request,
        state: str = "",
        code: str = "",
        error: Annotated[str | None, Query()] = None,
        error_description: Annotated[str | None, Query()] = None,
    ) -> Response:
        github = dashboard.github
        if github is None:
            raise NotFound("GitHub sign-in is not configured")
        attempt = await dashboard.logins.take(state, request.cookies.get(guard.login_cookie_name, ""))
        if attempt is None or attempt.get("provider") != "github":
            return refused(request, ATTEMPT_GONE)
        if error is not None or not code:
            return refused(request, f"GitHub did not sign you in: {error_description or error or 'no code'}.")
        try:
            token = await github.exchange(code, str(attempt["verifier"]))
        except SignInRefused as refusal:
            return refused(request, f"GitHub refused the sign-in: {refusal}.")
        user = await github.user(token.access_token)
        teams: set[str] = set()
        if dashboard.settings.dashboard.admin_teams:
            try:
                teams = await github.teams(token.access_token)
            except DashboardError as failure:
                log.warning("teams not readable at sign-in", login=user.login, error=failure.message)
        admin = signin.is_admin(user.login, teams=teams)
        if not admin:
            why = await signin.github_refusal(github, token.access_token, user.login)
            if why is not None:
                log.info("sign-in refused", login=user.login, reason=why)
                return refused(request, why, 403)
        try:
            repositories = await github.repositories(token.access_token)
        except DashboardError as failure:
            log.warning("repositories not readable at sign-in", login=user.login, error=failure.message)
            repositories = set()
        user_id = await signin.github_user(user.id)
        if dashboard.user_tokens is not None:
            await dashboard.user_tokens.put(user_id, token.access_token, token.expires_at)
        await dashboard.access.remember(user_id, repositories, refreshable=dashboard.user_tokens is not None)
        identity = UserIdentity(
            user_id=user_id, provider="github", login=user.login, name=user.name, avatar_url=user.avatar_url
        )
        return await signin.complete(identity, admin=admin, target=str(attempt["target"]))

    @site.get("/auth/oidc")
    async def oidc_start(request: Request, next: str | None = None) -> Response:
        if dashboard.oidc is None:
            raise NotFound("OpenID Connect sign-in is not configured")
        verifier, nonce, browser = pkce.verifier(), secrets.token_urlsafe(24), guard.browser(request)
        state = await dashboard.logins.start(
            browser, provider="oidc", verifier=verifier, nonce=nonce, target=local_path(next)
        )
        response = RedirectResponse(await dashboard.oidc.authorize_url(state, nonce, pkce.challenge(verifier)), 302)
        guard.set_login_cookie(response, browser)
        return response

    @site.get("/auth/oidc/callback")
    async def oidc_callback(
        request: Request, state: str = "", code: str = "", error: Annotated[str | None, Query()] = None
    ) -> Response:
        oidc = dashboard.oidc
        if oidc is None:
            raise NotFound("OpenID Connect sign-in is not configured")
        attempt = await dashboard.logins.take(state, request.cookies.get(guard.login_cookie_name, ""))
        if attempt is None or attempt.get("provider") != "oidc":
            return refused(request, ATTEMPT_GONE)
        if error is not None or not code:
            return refused(request, f"The identity provider did not sign you in: {error or 'no code'}.")
        try:
            user = await oidc.sign_in(code, str(attempt["verifier"]), str(attempt["nonce"]))
        except SignInRefused as refusal:
            return refused(request, f"The identity provider's answer was refused: {refusal}.")
        identity = UserIdentity(user_id=user.user_id(oidc.issuer), provider="oidc", login=user.login, name=user.name)
        admin = signin.is_admin(user.login, groups=user.groups)
        return await signin.complete(identity, admin=admin, target=str(attempt["target"]))

    @site.post("/auth/dev")
    async def dev_login(
        request: Request,
        login: Annotated[str, Form(max_length=200)] = "",
        csrf_token: Annotated[str, Form()] = "",
        admin: Annotated[bool, Form()] = False,
        next: Annotated[str, Form()] = "/threads",
    ) -> Response:
        if not dashboard.dev_login:
            raise NotFound("the development login is off")
        guard.check_origin(request)
        expected = request.cookies.get(guard.login_cookie_name, "")
        if not expected or not hmac.compare_digest(csrf_token, expected):
            raise Forbidden("the sign-in form expired; reload the page")
        if not re.fullmatch(DEV_LOGIN, login):
            return pages.render(
                request, "login.html", status=422, error="", methods=_methods(dashboard), target=local_path(next),
                login_token=expected, typed_login=login, admin_ticked=admin,
                errors={"login": DEV_LOGIN_RULE},
            )  # fmt: skip
        identity = UserIdentity(user_id=f"dev-{login.lower()}", provider="dev", login=login, name=login)
        return await signin.complete(identity, admin=admin or signin.is_admin(login), target=next)

    @site.get("/auth/dev/link/{token}")
    async def dev_link(token: str, next: str = "/threads") -> Response:
        if not dashboard.dev_login:
            raise NotFound("the development login is off")
        link = await redeem_dev_link(dashboard.runtime.redis, dashboard.runtime.keys, token)
        if link is None:
            raise Forbidden("this sign-in link is unknown, expired or already used; sign in on /login")
        identity = UserIdentity(user_id=f"dev-{link.login.lower()}", provider="dev", login=link.login, name=link.login)
        return await signin.complete(identity, admin=link.admin or signin.is_admin(link.login), target=next)

    @site.post("/logout")
    async def logout(request: Request) -> Response:
        principal = await guard.optional(request)
        if principal is not None:
            form = await request.form()
            token = form.get(CSRF_FIELD) or request.headers.get("x-csrf-token")
            guard.check_write(request, principal, token if isinstance(token, str) else None)
            await dashboard.sessions.delete(principal.token)
        response = RedirectResponse("/login?notice=" + quote("You are signed out."), status_code=303)
        guard.clear_session_cookie(response)
        return response

    @api.get("/me", responses=responses(), summary="Who you are, and your CSRF token")
    async def me(principal: Annotated[Principal, Depends(guard.principal)]) -> Me:
        session = principal.session
        return Me(
            user_id=session.user_id,
            login=session.login,
            name=session.name,
            provider=session.provider,
            admin=session.admin,
            csrf_token=session.csrf,
        )

    return [site, api]


def _methods(dashboard: Dashboard) -> dict[str, bool]:
    return {"github": dashboard.github is not None, "oidc": dashboard.oidc is not None, "dev": dashboard.dev_login}
