"""Server-side sessions in Redis, and the short-lived records of sign-ins in progress.

A session's cookie value is a random token; Redis holds the session under the token's SHA-256,
so the store never contains a usable cookie. The stored value carries a MAC under the server's
key (:class:`~drydock.infra.server_keys.ServerKeys`, purpose ``session``) over that digest and
the session's fields, checked on every read: a session written into Redis without the key (for
a cookie of the writer's choosing) or changed (``admin`` flipped, the expiry pushed out, moved
to another cookie's digest) is no session. Sessions expire with ``session_ttl``; signing out
deletes them. A sign-in in progress (OAuth ``state``) is read once: taking it deletes it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError
from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.infra.server_keys import Purpose, ServerKeys

log = structlog.get_logger(__name__)

LOGIN_TTL = timedelta(minutes=10)
"""How long a sign-in may take between leaving for the identity provider and coming back."""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Session(BaseModel):
    """Who is signed in, and the session's CSRF token."""

    model_config = ConfigDict(frozen=True)

    user_id: str
    provider: str
    """github, oidc or dev."""
    login: str
    name: str = ""
    avatar_url: str = ""
    admin: bool = False
    csrf: str
    created_at: datetime
    expires_at: datetime


class SessionStore:
    """Dashboard sessions in Redis, each signed with ``server_keys``."""

    def __init__(self, redis: Redis, keys: Keys, server_keys: ServerKeys, *, ttl: timedelta) -> None:
        self._redis = redis
        self._keys = keys
        self._server_keys = server_keys
        self._ttl = ttl

    async def create(
        self, *, user_id: str, provider: str, login: str, name: str = "", avatar_url: str = "", admin: bool = False
    ) -> tuple[str, Session]:
        """A new session; returns the cookie value and the session."""
        token = secrets.token_urlsafe(32)
        now = datetime.now(UTC)
        session = Session(
            user_id=user_id,
            provider=provider,
            login=login,
            name=name,
            avatar_url=avatar_url,
            admin=admin,
            csrf=secrets.token_urlsafe(32),
            created_at=now,
            expires_at=now + self._ttl,
        )
        digest = _digest(token)
        fields = session.model_dump_json()
        stored = json.dumps({"session": fields, "mac": self._server_keys.sign(Purpose.SESSION, digest, fields)})
        await self._redis.set(self._keys.session(digest), stored, px=int(self._ttl.total_seconds() * 1000))
        return token, session

    async def get(self, token: str) -> Session | None:
        """The live session of the cookie ``token``; ``None`` if there is none, it expired, or
        its record fails its MAC."""
        if not token:
            return None
        digest = _digest(token)
        raw = cast(str | None, await self._redis.get(self._keys.session(digest)))
        if raw is None:
            return None
        try:
            stored = json.loads(raw)
            fields, mac = stored["session"], stored["mac"]
            if not (isinstance(fields, str) and isinstance(mac, str)):
                raise TypeError("session fields and MAC are strings")
            if not self._server_keys.verify(Purpose.SESSION, mac, digest, fields):
                raise ValueError("MAC mismatch")
            session = Session.model_validate_json(fields)
        except (ValueError, TypeError, KeyError, ValidationError) as error:
            log.warning("session record refused", reason=str(error), session=digest[:12])
            return None
        return session if session.expires_at > datetime.now(UTC) else None

    async def delete(self, token: str) -> None:
        await self._redis.delete(self._keys.session(_digest(token)))


class LoginAttempts:
    """Sign-ins in progress, by their OAuth ``state``, each tied to the browser that began it.

    Without that tie, a callback URL from a sign-in someone began and left unfinished would sign
    any browser that opens it in as them (a login CSRF): ``state`` only proves that Drydock
    began the sign-in, not for whom."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def start(self, browser: str, **record: Any) -> str:
        """Remember ``record`` (PKCE verifier, nonce, where to return) under a fresh ``state``,
        for the browser whose pre-session token is ``browser``."""
        state = secrets.token_urlsafe(24)
        stored = json.dumps({"record": record, "browser": _digest(browser)})
        await self._redis.set(self._keys.login_attempt(state), stored, px=int(LOGIN_TTL.total_seconds() * 1000))
        return state

    async def take(self, state: str, browser: str) -> dict[str, Any] | None:
        """The record of ``state``, once; ``None`` if unknown, expired, already used or begun
        in another browser (it is used up then too)."""
        if not state or len(state) > 128:
            return None
        raw = cast(str | None, await self._redis.getdel(self._keys.login_attempt(state)))
        if raw is None:
            return None
        stored = json.loads(raw)
        if not hmac.compare_digest(str(stored.get("browser", "")), _digest(browser)):
            log.warning("sign-in refused: its callback came to another browser than the one that began it")
            return None
        return cast(dict[str, Any], stored["record"])
