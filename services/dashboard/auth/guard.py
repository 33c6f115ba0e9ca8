"""Who is asking, and may they: the dependencies every dashboard endpoint declares.

A request is signed in by its session cookie (HttpOnly, SameSite=Lax, Secure unless
``cookie_secure`` is off; named ``__Host-…`` when Secure, so no subdomain can set it). Every
state-changing request must also carry the session's CSRF token: the ``X-CSRF-Token`` header
for the JSON API, the ``csrf_token`` field for forms. A request whose ``Origin`` is not the
dashboard's own is refused as well. Not signed in is 401; signed in but not allowed is 403.
"""

import hmac
import secrets
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request, Response
from fastapi.security import APIKeyCookie, APIKeyHeader

from drydock.config import DashboardSettings
from services.dashboard.auth.access import RepositoryAccess
from services.dashboard.auth.sessions import Session, SessionStore
from services.dashboard.errors import Forbidden, NotSignedIn

CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"


@dataclass(frozen=True)
class Principal:
    """The signed-in person of a request."""

    session: Session
    token: str
    """The session cookie's value."""

    @property
    def user_id(self) -> str:
        return self.session.user_id

    @property
    def admin(self) -> bool:
        return self.session.admin


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class Guard:
    def __init__(self, settings: DashboardSettings, sessions: SessionStore, access: RepositoryAccess) -> None:
        self.settings = settings
        self.sessions = sessions
        self.access = access
        self.cookie_name = "__Host-drydock_session" if settings.cookie_secure else "drydock_session"
        self.login_cookie_name = "__Host-drydock_login" if settings.cookie_secure else "drydock_login"
        self._origin = _origin(settings.public_url)
        cookie = APIKeyCookie(name=self.cookie_name, auto_error=False, description="The dashboard session.")
        header = APIKeyHeader(
            name=CSRF_HEADER, auto_error=False, description="The session's CSRF token (GET /api/v1/me)."
        )

        async def principal(request: Request, token: Annotated[str | None, Depends(cookie)]) -> Principal:
            """The signed-in person; 401 otherwise."""
            return await self.principal_of(request, token)

        async def writer(
            request: Request,
            found: Annotated[Principal, Depends(principal)],
            csrf: Annotated[str | None, Depends(header)],
        ) -> Principal:
            """The signed-in person of a state-changing API request, with its CSRF token."""
            self.check_write(request, found, csrf)
            return found

        async def admin(found: Annotated[Principal, Depends(principal)]) -> Principal:
            if not found.admin:
                raise Forbidden("this needs a Drydock administrator")
            return found

        async def admin_writer(found: Annotated[Principal, Depends(writer)]) -> Principal:
            if not found.admin:
                raise Forbidden("this needs a Drydock administrator")
            return found

        self.principal = principal
        self.writer = writer
        self.admin = admin
        self.admin_writer = admin_writer

    async def principal_of(self, request: Request, token: str | None = None) -> Principal:
        token = token if token is not None else request.cookies.get(self.cookie_name)
        session = await self.sessions.get(token) if token else None
        if session is None or token is None:
            raise NotSignedIn("sign in first")
        return Principal(session, token)

    async def optional(self, request: Request) -> Principal | None:
        try:
            return await self.principal_of(request)
        except NotSignedIn:
            return None

    def check_origin(self, request: Request) -> None:
        origin = request.headers.get("origin")
        if origin is not None and origin != "null" and origin.lower() != self._origin:
            raise Forbidden(f"requests from {origin} are refused")

    def check_write(self, request: Request, principal: Principal, csrf: str | None) -> None:
        """403 unless ``csrf`` is the session's token and the request comes from the dashboard."""
        self.check_origin(request)
        if not csrf or not hmac.compare_digest(csrf, principal.session.csrf):
            raise Forbidden(f"missing or wrong CSRF token (send it in {CSRF_HEADER} or the {CSRF_FIELD} field)")

    def set_session_cookie(self, response: Response, token: str) -> None:
        response.set_cookie(
            self.cookie_name,
            token,
            max_age=int(self.settings.session_ttl.total_seconds()),
            path="/",
            secure=self.settings.cookie_secure,
            httponly=True,
            samesite="lax",
        )

    def clear_session_cookie(self, response: Response) -> None:
        response.delete_cookie(
            self.cookie_name, path="/", secure=self.settings.cookie_secure, httponly=True, samesite="lax"
        )

    def browser(self, request: Request) -> str:
        """The browser's pre-session token (its login cookie), or a new one to set with
        :meth:`set_login_cookie`."""
        return request.cookies.get(self.login_cookie_name) or secrets.token_urlsafe(24)

    def set_login_cookie(self, response: Response, value: str) -> None:
        """The browser's pre-session token: the sign-in forms' CSRF token (double submit), and
        what ties a sign-in at GitHub or the identity provider to the browser that began it."""
        response.set_cookie(
            self.login_cookie_name,
            value,
            max_age=3600,
            path="/",
            secure=self.settings.cookie_secure,
            httponly=True,
            samesite="lax",
        )
