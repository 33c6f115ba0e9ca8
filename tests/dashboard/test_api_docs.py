"""``/openapi.json`` and ``/docs`` answer only signed-in people in production."""

from __future__ import annotations

import pytest

from tests.dashboard.conftest import Site, SiteFactory


@pytest.fixture
async def production(site_factory: SiteFactory) -> Site:
    return await site_factory(environment="production", dashboard={"dev_login": None})


class TestApiDocumentsInProduction:
    @pytest.mark.parametrize("path", ["/openapi.json", "/docs"])
    async def test_refused_without_sign_in(self, production: Site, path: str) -> None:
        response = await production.client().get(path)
        assert response.status_code == 401
        assert "paths" not in response.text

    async def test_served_to_a_signed_in_person(self, production: Site) -> None:
        person = await production.session("gh-2", "bob")
        document = await person.client.get("/openapi.json")
        assert document.status_code == 200
        assert "/api/v1/me" in document.json()["paths"]
        page = await person.client.get("/docs")
        assert page.status_code == 200
        assert "/openapi.json" in page.text

    async def test_redoc_is_not_served(self, production: Site) -> None:
        person = await production.session("gh-2", "bob")
        assert (await person.client.get("/redoc")).status_code == 404


class TestApiDocumentsInDevelopment:
    async def test_open_to_everyone(self, site: Site) -> None:
        assert (await site.client().get("/openapi.json")).status_code == 200
