"""``/openapi.json`` and ``/docs`` answer only signed-in people in production."""

from __future__ import annotations

import re

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
        page = await site.client().get("/docs")
        assert page.status_code == 200
        assert 'data-openapi="/openapi.json"' in page.text


class TestBundledSwaggerUi:
    async def test_the_page_loads_only_files_the_server_serves(self, site: Site) -> None:
        client = site.client()
        page = (await client.get("/docs")).text
        sources = re.findall(r'(?:src|href)="([^"]+)"', page)
        assert sources
        assert all(source.startswith("/") for source in sources), sources
        assert "<script>" not in page
        for source in [source for source in sources if source.startswith("/docs/")]:
            answer = await client.get(source)
            assert answer.status_code == 200, source
        bundle = await client.get("/docs/assets/swagger-ui-bundle.js")
        assert bundle.headers["content-type"].startswith("text/javascript")
        assert "SwaggerUIBundle" in bundle.text
        assert (await client.get("/docs/assets/../pyproject.toml")).status_code == 404
        assert (await client.get("/docs/assets/redoc.standalone.js")).status_code == 404

    async def test_in_production_the_page_needs_a_sign_in_and_the_assets_do_not(self, production: Site) -> None:
        client = production.client()
        assert (await client.get("/docs")).status_code == 401
        assert (await client.get("/docs/assets/swagger-ui.css")).status_code == 200
        person = await production.session("gh-2", "bob")
        assert 'src="/docs/assets/swagger-ui-bundle.js"' in (await person.client.get("/docs")).text
