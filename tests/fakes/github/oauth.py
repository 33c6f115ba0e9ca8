"""Signing in with GitHub, the web side: ``GET /login/oauth/authorize`` (the consent page, and
GitHub's own sign-in when the browser is not signed in) and ``POST /login/oauth/access_token``
(the code exchange), with GitHub's redirects and error answers.

As GitHub does, the token endpoint answers errors with status 200 and an ``error`` field; it
answers JSON when asked (``Accept: application/json``) and form encoding otherwise. A code is
good once, for ten minutes, for the redirect URI it was issued to, and (when the authorization
asked with PKCE) only with the matching ``code_verifier``.
"""

from __future__ import annotations

import base64
import hashlib
import html
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

from tests.fakes.github.auth import state
from tests.fakes.github.identity import USER_TOKEN_LIFETIME, OAuthClient, identity_of

router = APIRouter()

TOKEN_DOCS = (
    "https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/troubleshooting-authentication"
)


def _redirect(target: str, **query: str) -> RedirectResponse:
    separator = "&" if "?" in target else "?"
    return RedirectResponse(f"{target}{separator}{urlencode(query)}", status_code=302)


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        f"<!doctype html><html lang='en'><head><title>{html.escape(title)}</title></head>"
        f"<body><main><h1>{html.escape(title)}</h1>{body}</main></body></html>",
        status_code=status,
    )


def _registered(client: OAuthClient, redirect_uri: str) -> bool:
    return any(redirect_uri.startswith(url) for url in client.callback_urls)


async def _params(request: Request) -> dict[str, str]:
    found = dict(request.query_params.items())
    if request.method == "POST":
        form = await request.form()
        found |= {key: value for key, value in form.items() if isinstance(value, str)}
    return found


@router.api_route("/login/oauth/authorize", methods=["GET", "POST"], include_in_schema=False)
async def authorize(request: Request) -> Response:
    identity = identity_of(state(request))
    params = await _params(request)
    client = identity.clients.get(params.get("client_id", ""))
    if client is None:
        return _page("Page not found", "<p>This is not the web page you are looking for.</p>", 404)
    redirect_uri = params.get("redirect_uri") or (client.callback_urls[0] if client.callback_urls else "")
    if not _registered(client, redirect_uri):
        fallback = client.callback_urls[0] if client.callback_urls else ""
        return _redirect(
            fallback,
            error="redirect_uri_mismatch",
            error_description="The redirect_uri MUST match the registered callback URL for this application.",
            error_uri=TOKEN_DOCS,
            state=params.get("state", ""),
        )
    signing_in = identity.user(params.get("login", "")) if request.method == "POST" else None
    if signing_in is not None and identity.signed_in is None:
        identity.signed_in = signing_in.login
    if request.method == "POST" and params.get("decision") == "cancel":
        return _redirect(
            redirect_uri,
            error="access_denied",
            error_description="The user has denied your application access.",
            error_uri=TOKEN_DOCS,
            state=params.get("state", ""),
        )
    login = identity.signed_in
    approved = request.method == "POST" and params.get("decision") == "authorize"
    if login is None or not (approved or (login.lower(), client.client_id) in identity.authorized):
        return _consent(params, client, login)
    identity.authorized.add((login.lower(), client.client_id))
    grant = identity.grant(
        client, login, redirect_uri, params.get("code_challenge"), params.get("code_challenge_method")
    )
    return _redirect(redirect_uri, code=grant.code, state=params.get("state", ""))


def _consent(params: dict[str, str], client: OAuthClient, login: str | None) -> HTMLResponse:
    hidden = "".join(
        f"<input type='hidden' name='{html.escape(name)}' value='{html.escape(value)}'>"
        for name, value in params.items()
        if name not in {"login", "decision"}
    )
    who = (
        f"<p>Signed in as <strong>{html.escape(login)}</strong>.</p>"
        if login
        else "<label for='login'>Username or email address</label><input id='login' name='login' required>"
    )
    return _page(
        "Authorize Drydock",
        f"<form method='post' action='/login/oauth/authorize'>{hidden}{who}"
        f"<p>The application (client {html.escape(client.client_id)}) wants to know who you are.</p>"
        "<button type='submit' name='decision' value='authorize'>Authorize</button> "
        "<button type='submit' name='decision' value='cancel'>Cancel</button></form>",
    )


def _challenge(verifier: str, method: str | None) -> str:
    if (method or "plain").upper() == "S256":
        return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier


def _answer(request: Request, body: dict[str, Any]) -> Response:
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse(body)
    return Response(
        urlencode({key: str(value) for key, value in body.items()}), media_type="application/x-www-form-urlencoded"
    )


def _error(request: Request, error: str, description: str) -> Response:
    return _answer(request, {"error": error, "error_description": description, "error_uri": TOKEN_DOCS})


@router.post("/login/oauth/access_token", include_in_schema=False)
async def access_token(request: Request) -> Response:
    identity = identity_of(state(request))
    if request.headers.get("content-type", "").startswith("application/json"):
        raw = await request.json()
        params = {key: str(value) for key, value in raw.items()} if isinstance(raw, dict) else {}
    else:
        params = await _params(request)
    client = identity.clients.get(params.get("client_id", ""))
    if client is None or params.get("client_secret") != client.client_secret:
        return _error(
            request, "incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect."
        )
    grant = identity.grants.get(params.get("code", ""))
    if grant is None or grant.used or grant.client_id != client.client_id or grant.expires_at <= datetime.now(UTC):
        return _error(request, "bad_verification_code", "The code passed is incorrect or expired.")
    if params.get("redirect_uri") and params["redirect_uri"] != grant.redirect_uri:
        return _error(
            request,
            "redirect_uri_mismatch",
            "The redirect_uri MUST match the registered callback URL for this application.",
        )
    if grant.code_challenge is not None:
        verifier = params.get("code_verifier", "")
        if not verifier or _challenge(verifier, grant.code_challenge_method) != grant.code_challenge:
            return _error(request, "bad_verification_code", "The code passed is incorrect or expired.")
    grant.used = True
    user = identity.user(grant.login)
    assert user is not None
    token = identity.issue_token(client, user)
    return _answer(
        request,
        {
            "access_token": token.token,
            "expires_in": int(USER_TOKEN_LIFETIME.total_seconds()),
            "refresh_token": "ghr_" + token.token[4:],
            "refresh_token_expires_in": 15_897_600,
            "scope": "",
            "token_type": "bearer",
        },
    )
