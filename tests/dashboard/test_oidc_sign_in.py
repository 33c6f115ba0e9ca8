"""Signing in with a generic OpenID Connect provider (a test double): the code flow with state,
nonce and PKCE, the ID token checked, administrators by group."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.dashboard.conftest import PUBLIC_URL, Site, SiteFactory
from tests.fakes.oidc import FakeOidc

CALLBACK = f"{PUBLIC_URL}/auth/oidc/callback"


@pytest.fixture
async def provider() -> AsyncIterator[FakeOidc]:
    async with FakeOidc() as fake:
        fake.client("drydock", "s3cret", CALLBACK)
        yield fake


@pytest.fixture
async def site(site_factory: SiteFactory, provider: FakeOidc) -> Site:
    return await site_factory(
        dashboard={
            "oidc_issuer": provider.issuer,
            "oidc_client_id": "drydock",
            "oidc_client_secret": "s3cret",
            "admin_groups": ["drydock-admins"],
            "dev_login": False,
        }
    )


async def sign_in(site: Site, *, back_in: httpx.AsyncClient | None = None) -> tuple[httpx.AsyncClient, httpx.Response]:
    """Begin a sign-in in one browser and come back from the provider in ``back_in`` (the same
    browser unless given)."""
    client = site.client()
    start = await client.get("/auth/oidc?next=/profile")
    assert start.status_code == 302
    query = parse_qs(urlsplit(start.headers["location"]).query)
    assert query["code_challenge_method"] == ["S256"]
    assert query["nonce"][0]
    async with httpx.AsyncClient() as browser:
        back = await browser.get(start.headers["location"])
    assert back.status_code in {302, 307}
    client = back_in or client
    return client, await client.get(back.headers["location"].removeprefix(PUBLIC_URL))


class TestOidc:
    async def test_a_person_signs_in(self, site: Site, provider: FakeOidc) -> None:
        provider.person = {"sub": "u-17", "preferred_username": "grace", "name": "Grace Hopper"}
        client, answer = await sign_in(site)
        assert answer.status_code == 303, answer.text
        assert answer.headers["location"] == "/profile"
        me = (await client.get("/api/v1/me")).json()
        assert (me["login"], me["name"], me["provider"], me["admin"]) == ("grace", "Grace Hopper", "oidc", False)
        assert me["user_id"].startswith("oidc-")

    async def test_a_callback_opened_in_another_browser_signs_nobody_in(self, site: Site, provider: FakeOidc) -> None:
        provider.person = {"sub": "u-66", "preferred_username": "mallory"}
        victim, answer = await sign_in(site, back_in=site.client())
        assert answer.status_code == 400
        assert "begun in another browser" in answer.text
        assert (await victim.get("/api/v1/me")).status_code == 401

    async def test_the_same_subject_is_the_same_user(self, site: Site, provider: FakeOidc) -> None:
        provider.person = {"sub": "u-17", "preferred_username": "grace"}
        first, _ = await sign_in(site)
        provider.person = {"sub": "u-17", "preferred_username": "grace.h"}
        second, _ = await sign_in(site)
        assert (await first.get("/api/v1/me")).json()["user_id"] == (await second.get("/api/v1/me")).json()["user_id"]

    async def test_an_admin_group_makes_an_administrator(self, site: Site, provider: FakeOidc) -> None:
        provider.person = {"sub": "u-1", "preferred_username": "root", "groups": ["staff", "drydock-admins"]}
        client, _ = await sign_in(site)
        assert (await client.get("/api/v1/me")).json()["admin"] is True

    async def test_a_token_with_another_nonce_is_refused(self, site: Site, provider: FakeOidc) -> None:
        provider.state.nonce_override = "replayed"
        _, answer = await sign_in(site)
        assert answer.status_code == 400
        assert "ID token is not valid" in answer.text
