"""Sessions written or changed in Redis without the server's key are no sessions: the test holds
the store, as if it had leaked, and the dashboard refuses what it writes."""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import UTC, datetime, timedelta
from typing import cast

from cryptography.fernet import Fernet

from drydock.infra.server_keys import Purpose, ServerKeys
from services.dashboard.auth.sessions import Session
from tests.dashboard.conftest import Site


def _session_key(site: Site, cookie: str) -> str:
    return site.runtime.keys.session(hashlib.sha256(cookie.encode()).hexdigest())


def _admin(now: datetime) -> Session:
    return Session(
        user_id="gh-666",
        provider="github",
        login="mallory",
        admin=True,
        csrf=secrets.token_urlsafe(32),
        created_at=now,
        expires_at=now + timedelta(hours=8),
    )


async def _me(site: Site, cookie: str) -> int:
    client = site.client()
    client.cookies.set("drydock_session", cookie)
    return (await client.get("/api/v1/me")).status_code


class TestForgedSessions:
    async def test_a_real_session_is_accepted(self, site: Site) -> None:
        person = await site.session("gh-2", "bob")
        assert (await person.client.get("/api/v1/me")).json()["admin"] is False

    async def test_an_admin_session_in_the_old_unsigned_form_is_refused(self, site: Site) -> None:
        cookie = secrets.token_urlsafe(32)
        await site.runtime.redis.set(_session_key(site, cookie), _admin(datetime.now(UTC)).model_dump_json())
        assert await _me(site, cookie) == 401

    async def test_an_admin_session_signed_with_another_key_is_refused(self, site: Site) -> None:
        cookie = secrets.token_urlsafe(32)
        digest = hashlib.sha256(cookie.encode()).hexdigest()
        fields = _admin(datetime.now(UTC)).model_dump_json()
        forger = ServerKeys([Fernet.generate_key().decode()])
        stored = json.dumps({"session": fields, "mac": forger.sign(Purpose.SESSION, digest, fields)})
        await site.runtime.redis.set(_session_key(site, cookie), stored)
        assert await _me(site, cookie) == 401

    async def test_admin_flipped_in_a_real_session_is_refused(self, site: Site) -> None:
        person = await site.session("gh-2", "bob")
        cookie = person.client.cookies["drydock_session"]
        key = _session_key(site, cookie)
        stored = json.loads(cast(str, await site.runtime.redis.get(key)))
        stored["session"] = stored["session"].replace('"admin":false', '"admin":true')
        assert '"admin":true' in stored["session"]
        await site.runtime.redis.set(key, json.dumps(stored))
        assert (await person.client.get("/api/v1/me")).status_code == 401

    async def test_a_session_moved_to_another_cookie_is_refused(self, site: Site) -> None:
        person = await site.session("gh-1", "root", admin=True)
        stored = cast(str, await site.runtime.redis.get(_session_key(site, person.client.cookies["drydock_session"])))
        cookie = secrets.token_urlsafe(32)
        await site.runtime.redis.set(_session_key(site, cookie), stored)
        assert await _me(site, cookie) == 401

    async def test_a_session_kept_past_its_expiry_is_refused(self, site: Site) -> None:
        person = await site.session("gh-2", "bob")
        cookie = person.client.cookies["drydock_session"]
        past = datetime.now(UTC) - timedelta(days=1)
        fields = _admin(past).model_copy(update={"admin": False, "expires_at": past}).model_dump_json()
        digest = hashlib.sha256(cookie.encode()).hexdigest()
        signed = ServerKeys.from_settings(site.settings.crypto).sign(Purpose.SESSION, digest, fields)
        # Signed with the real key (a record saved before it expired), its Redis expiry removed.
        await site.runtime.redis.set(_session_key(site, cookie), json.dumps({"session": fields, "mac": signed}))
        assert await _me(site, cookie) == 401
