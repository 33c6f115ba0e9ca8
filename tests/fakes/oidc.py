"""A test double of an OpenID Connect provider: discovery, the authorization endpoint (it signs
in whoever the test chose, at once), the token endpoint (code exchange with client
authentication and PKCE) and the signing keys; ID tokens are RS256 JWTs made with joserfc.

``async with FakeOidc() as provider:`` serves it at ``provider.issuer``; register the client with
``provider.client(client_id, secret, redirect_uri)`` and choose the person with
``provider.person = {"sub": ..., "preferred_username": ..., "groups": [...]}``.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse
from joserfc import jwt
from joserfc.jwk import RSAKey

from tests.fakes.loopback import LoopbackServer


@dataclass
class _Code:
    client_id: str
    redirect_uri: str
    nonce: str | None
    challenge: str | None
    claims: dict[str, Any]


@dataclass
class _State:
    key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "fake-1", "use": "sig"}))
    clients: dict[str, tuple[str, str]] = field(default_factory=dict)
    codes: dict[str, _Code] = field(default_factory=dict)
    person: dict[str, Any] = field(default_factory=lambda: {"sub": "user-1", "preferred_username": "ada"})
    issuer: str = ""
    nonce_override: str | None = None
    """A test sets it to make the provider answer with a wrong nonce."""


def _error(error: str, description: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=status)


def _create_app(state: _State) -> FastAPI:
    app = FastAPI(title="Fake OpenID Connect provider")

    @app.get("/.well-known/openid-configuration")
    async def discovery() -> dict[str, Any]:
        return {
            "issuer": state.issuer,
            "authorization_endpoint": f"{state.issuer}/authorize",
            "token_endpoint": f"{state.issuer}/token",
            "jwks_uri": f"{state.issuer}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        }

    @app.get("/jwks")
    async def jwks() -> dict[str, Any]:
        return {"keys": [state.key.as_dict(private=False)]}

    @app.get("/authorize")
    async def authorize(request: Request) -> Response:
        query = request.query_params
        registered = state.clients.get(query.get("client_id", ""))
        if registered is None or query.get("redirect_uri") != registered[1]:
            return _error("invalid_request", "unknown client or redirect_uri")
        code = secrets.token_urlsafe(16)
        state.codes[code] = _Code(
            query["client_id"],
            query["redirect_uri"],
            query.get("nonce"),
            query.get("code_challenge"),
            dict(state.person),
        )
        return RedirectResponse(f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query.get('state', '')})}")

    @app.post("/token")
    async def token(request: Request) -> Response:
        form = {key: value for key, value in (await request.form()).items() if isinstance(value, str)}
        client_id, secret = form.get("client_id", ""), form.get("client_secret")
        header = request.headers.get("authorization", "")
        if header.lower().startswith("basic "):
            client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
        registered = state.clients.get(client_id)
        if registered is None or registered[0] != secret:
            return _error("invalid_client", "client authentication failed", 401)
        found = state.codes.pop(form.get("code", ""), None)
        if found is None or found.client_id != client_id or found.redirect_uri != form.get("redirect_uri"):
            return _error("invalid_grant", "unknown or used code")
        if found.challenge is not None:
            digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
            if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != found.challenge:
                return _error("invalid_grant", "PKCE verification failed")
        now = int(time.time())
        claims = {
            "iss": state.issuer,
            "aud": client_id,
            "iat": now,
            "exp": now + 300,
            **({"nonce": state.nonce_override or found.nonce} if found.nonce else {}),
            **found.claims,
        }
        id_token = jwt.encode({"alg": "RS256", "kid": "fake-1"}, claims, state.key)
        return JSONResponse({"access_token": secrets.token_urlsafe(24), "token_type": "Bearer", "id_token": id_token})

    return app


class FakeOidc(LoopbackServer):
    def __init__(self) -> None:
        self.state = _State()
        super().__init__(_create_app(self.state))

    async def __aenter__(self) -> FakeOidc:
        await super().__aenter__()
        self.state.issuer = self.base_url
        return self

    @property
    def issuer(self) -> str:
        return self.state.issuer

    @property
    def person(self) -> dict[str, Any]:
        return self.state.person

    @person.setter
    def person(self, claims: dict[str, Any]) -> None:
        self.state.person = claims

    def client(self, client_id: str, secret: str, redirect_uri: str) -> None:
        self.state.clients[client_id] = (secret, redirect_uri)
