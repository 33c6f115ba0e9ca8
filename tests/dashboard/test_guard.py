"""Sessions and their guards: signed out is 401, a write without the session's CSRF token or from
another origin is 403, cookies are HttpOnly and SameSite (and Secure, ``__Host-``, by default),
sign-out ends the session, and the development login exists only when configured and never in
production."""

from __future__ import annotations

import re

import pytest

from services.dashboard.auth.dev_links import create_dev_link
from tests.dashboard.conftest import Site, SiteFactory


class TestSignedOut:
    @pytest.mark.parametrize(
        ("method", "url"),
        [
            ("GET", "/api/v1/me"),
            ("GET", "/api/v1/profile"),
            ("PUT", "/api/v1/profile"),
            ("GET", "/api/v1/team"),
            ("GET", "/api/v1/repositories"),
            ("GET", "/api/v1/review-styles"),
            ("GET", "/api/v1/threads"),
            ("POST", "/api/v1/threads"),
            ("GET", "/api/v1/threads/00000000-0000-4000-8000-000000000000/events/stream"),
        ],
    )
    async def test_the_api_answers_401(self, site: Site, method: str, url: str) -> None:
        answer = await site.client().request(method, url, json={})
        assert answer.status_code == 401
        assert answer.json() == {"detail": "sign in first"}

    async def test_a_page_sends_to_the_sign_in_page_and_back(self, site: Site) -> None:
        answer = await site.client().get("/threads?state=running")
        assert answer.status_code == 303
        assert answer.headers["location"] == "/login?next=%2Fthreads%3Fstate%3Drunning"

    async def test_a_forged_session_cookie_is_not_a_session(self, site: Site) -> None:
        client = site.client()
        client.cookies.set("drydock_session", "forged")
        assert (await client.get("/api/v1/me")).status_code == 401


class TestCsrf:
    async def test_a_write_without_the_token_is_403(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.client.put("/api/v1/profile", json={})
        assert answer.status_code == 403
        assert "CSRF" in answer.json()["detail"]

    async def test_another_session_s_token_is_403(self, site: Site) -> None:
        ada, bob = await site.sign_in("ada"), await site.sign_in("bob")
        answer = await ada.send("PUT", "/api/v1/profile", {}, headers={"X-CSRF-Token": bob.csrf})
        assert answer.status_code == 403

    async def test_a_write_from_another_origin_is_403(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.send("PUT", "/api/v1/profile", {}, headers={"Origin": "https://evil.example"})
        assert answer.status_code == 403
        assert "evil.example" in answer.json()["detail"]
        assert (await ada.send("PUT", "/api/v1/profile", {}, headers={"Origin": "http://dashboard.test"})).is_success

    async def test_a_form_without_the_token_is_refused(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.client.post("/profile", data={"model": "gpt-5"})
        assert answer.status_code == 403
        assert "CSRF" in answer.text


class TestCookies:
    async def test_the_session_cookie_is_http_only_and_same_site(self, site: Site) -> None:
        client = site.client()
        page = await client.get("/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None
        answer = await client.post("/auth/dev", data={"login": "ada", "csrf_token": token.group(1)})
        cookie = answer.headers["set-cookie"]
        assert cookie.startswith("drydock_session=")
        assert "HttpOnly" in cookie
        assert "SameSite=lax" in cookie
        assert "Secure" not in cookie

    async def test_by_default_it_is_secure_and_host_only(self, site_factory: SiteFactory) -> None:
        site = await site_factory(dashboard={"cookie_secure": True})
        page = await site.client().get("/login")
        assert page.headers["set-cookie"].startswith("__Host-drydock_login=")
        assert "Secure" in page.headers["set-cookie"]


class TestSignOut:
    async def test_signing_out_ends_the_session(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        cookie = ada.client.cookies["drydock_session"]
        answer = await ada.form("/logout", {})
        assert answer.status_code == 303
        assert (await ada.get("/api/v1/me")).status_code == 401
        again = site.client()
        again.cookies.set("drydock_session", cookie)
        assert (await again.get("/api/v1/me")).status_code == 401

    async def test_signing_out_needs_the_csrf_token(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        assert (await ada.client.post("/logout")).status_code == 403
        assert (await ada.get("/api/v1/me")).status_code == 200


class TestDevelopmentLogin:
    async def test_it_signs_in_as_the_login_given(self, site: Site) -> None:
        ada = await site.sign_in("ada", admin=True)
        me = (await ada.get("/api/v1/me")).json()
        assert me | {"csrf_token": ""} == {
            "user_id": "dev-ada", "login": "ada", "name": "ada", "provider": "dev", "admin": True, "csrf_token": "",
        }  # fmt: skip

    async def test_it_needs_the_sign_in_form_s_token(self, site: Site) -> None:
        answer = await site.client().post("/auth/dev", data={"login": "ada", "csrf_token": "guess"})
        assert answer.status_code == 403

    async def test_it_does_not_exist_unless_configured(self, site_factory: SiteFactory) -> None:
        site = await site_factory(dashboard={"dev_login": False})
        client = site.client()
        assert "Development login" not in (await client.get("/login")).text
        assert (await client.post("/auth/dev", data={"login": "ada", "csrf_token": "x"})).status_code == 404

    async def test_production_leaves_it_off(self, site_factory: SiteFactory) -> None:
        site = await site_factory(environment="production", dashboard={"dev_login": None})
        client = site.client()
        assert "Development login" not in (await client.get("/login")).text
        assert (await client.post("/auth/dev", data={"login": "ada", "csrf_token": "x"})).status_code == 404

    async def test_a_one_time_link_signs_in_and_redirects_once(self, site: Site) -> None:
        path = await create_dev_link(
            site.runtime.redis, site.runtime.keys, login="demo", admin=True, target="/threads/abc"
        )
        client = site.client()
        answer = await client.get(path)
        assert answer.status_code == 303
        assert answer.headers["location"] == "/threads/abc"
        me = (await client.get("/api/v1/me")).json()
        assert (me["login"], me["admin"]) == ("demo", True)
        again = await site.client().get(path)
        assert again.status_code == 403
        assert "already used" in again.text

    async def test_a_one_time_link_needs_the_development_login(self, site_factory: SiteFactory) -> None:
        site = await site_factory(dashboard={"dev_login": False})
        path = await create_dev_link(site.runtime.redis, site.runtime.keys, login="demo", admin=True, target="/")
        assert (await site.client().get(path)).status_code == 404

    async def test_a_bad_login_is_a_readable_error(self, site: Site) -> None:
        client = site.client()
        page = await client.get("/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None
        answer = await client.post("/auth/dev", data={"login": "no spaces", "csrf_token": token.group(1)})
        assert answer.status_code == 422
        assert "text/html" in answer.headers["content-type"]


class TestNextTarget:
    async def test_only_local_paths_are_followed(self, site: Site) -> None:
        client = site.client()
        page = await client.get("/login?next=//evil.example/x")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None
        answer = await client.post(
            "/auth/dev", data={"login": "ada", "csrf_token": token.group(1), "next": "https://evil.example"}
        )
        assert answer.headers["location"] == "/threads"
