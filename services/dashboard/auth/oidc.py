"""Signing in with a generic OpenID Connect provider: discovery, the authorization code flow
with ``state``, ``nonce`` and PKCE, and the ID token checked against the provider's keys
(signature, issuer, audience, expiry, nonce) with joserfc, Authlib's JOSE library.

The person is identified by the issuer and ``sub``; the login shown is ``oidc_username_claim``
and the groups (for the administrator check) ``oidc_groups_claim``. Such a person sees their own
threads, and every thread if they are an administrator.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from drydock.config import Settings
from drydock.errors import describe
from services.dashboard.auth.github import SignInRefused
from services.dashboard.errors import BadGateway, Unavailable

DISCOVERY_TTL = 3600.0
ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "PS256")


@dataclass(frozen=True)
class OidcUser:
    subject: str
    login: str
    name: str
    groups: frozenset[str]

    def user_id(self, issuer: str) -> str:
        """The Drydock user of this person: stable across sign-ins, unique per issuer."""
        return "oidc-" + hashlib.sha256(f"{issuer}|{self.subject}".encode()).hexdigest()[:20]


class OidcSignIn:
    def __init__(self, settings: Settings, http: httpx.AsyncClient) -> None:
        dashboard = settings.dashboard
        assert dashboard.oidc_issuer is not None
        assert dashboard.oidc_client_id is not None
        self.issuer = dashboard.oidc_issuer
        self._client_id = dashboard.oidc_client_id
        self._client_secret = (
            dashboard.oidc_client_secret.get_secret_value() if dashboard.oidc_client_secret is not None else None
        )
        self._scopes = dashboard.oidc_scopes
        self._username_claim = dashboard.oidc_username_claim
        self._groups_claim = dashboard.oidc_groups_claim
        self.redirect_uri = f"{dashboard.public_url}/auth/oidc/callback"
        self._http = http
        self._discovered: tuple[float, dict[str, Any]] | None = None

    async def _get_json(self, url: str) -> Any:
        try:
            response = await self._http.get(url, headers={"Accept": "application/json"})
        except httpx.HTTPError as error:
            raise Unavailable(f"the identity provider cannot be reached: {describe(error)}") from None
        if not response.is_success:
            raise BadGateway(f"the identity provider answered {response.status_code} to GET {url}")
        return response.json()

    async def configuration(self) -> dict[str, Any]:
        """The provider's discovery document (kept an hour in this process: an optimization)."""
        if self._discovered is not None and time.monotonic() - self._discovered[0] < DISCOVERY_TTL:
            return self._discovered[1]
        found = await self._get_json(f"{self.issuer}/.well-known/openid-configuration")
        if not isinstance(found, dict) or found.get("issuer", "").rstrip("/") != self.issuer:
            raise BadGateway("the identity provider's discovery document names another issuer")
        self._discovered = (time.monotonic(), found)
        return found

    async def authorize_url(self, state: str, nonce: str, code_challenge: str) -> str:
        configuration = await self.configuration()
        query = {
            "response_type": "code",
            "client_id": self._client_id,
            "redirect_uri": self.redirect_uri,
            "scope": self._scopes,
            "state": state,
            "nonce": nonce,
            "code_challenge": code_challenge,
            "code_challenge_method": "S256",
        }
        return f"{configuration['authorization_endpoint']}?{urlencode(query)}"

    async def sign_in(self, code: str, code_verifier: str, nonce: str) -> OidcUser:
        """Exchange the code and check the ID token; :class:`SignInRefused` if either fails."""
        configuration = await self.configuration()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "code_verifier": code_verifier,
            "client_id": self._client_id,
        }
        auth = httpx.BasicAuth(self._client_id, self._client_secret) if self._client_secret is not None else None
        try:
            response = await self._http.post(
                configuration["token_endpoint"], data=form, auth=auth or httpx.USE_CLIENT_DEFAULT,
                headers={"Accept": "application/json"},
            )  # fmt: skip
        except httpx.HTTPError as error:
            raise Unavailable(f"the identity provider cannot be reached: {describe(error)}") from None
        body = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        if not response.is_success or "id_token" not in body:
            raise SignInRefused(str(body.get("error_description") or body.get("error") or response.status_code))
        keys = KeySet.import_key_set(await self._get_json(configuration["jwks_uri"]))
        try:
            token = jwt.decode(str(body["id_token"]), keys, algorithms=list(ALGORITHMS))
            jwt.JWTClaimsRegistry(
                leeway=60,
                iss={"essential": True, "value": self.issuer},
                aud={"essential": True, "value": self._client_id},
                sub={"essential": True},
                exp={"essential": True},
                nonce={"essential": True, "value": nonce},
            ).validate(token.claims)
        except (JoseError, ValueError) as error:
            raise SignInRefused(f"the ID token is not valid: {error}") from None
        claims = token.claims
        groups = claims.get(self._groups_claim) or []
        return OidcUser(
            subject=str(claims["sub"]),
            login=str(claims.get(self._username_claim) or claims.get("email") or claims["sub"]),
            name=str(claims.get("name") or ""),
            groups=frozenset(str(group) for group in groups) if isinstance(groups, list) else frozenset(),
        )
