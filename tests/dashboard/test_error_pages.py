"""Errors a browser meets are pages with navigation; API clients keep JSON. The favicon is served."""

from __future__ import annotations

import httpx

from drydock.http import SiteRouter
from tests.dashboard.conftest import PUBLIC_URL, Site

HTML = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


class TestUnknownPages:
    async def test_a_browser_gets_a_404_page_with_navigation(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        page = await ada.get("/no/such/page", headers=HTML)
        assert page.status_code == 404
        assert page.headers["content-type"].startswith("text/html")
        assert "There is no page at /no/such/page." in page.text
        assert '<nav aria-label="Main">' in page.text
        assert '<nav aria-label="Where to go"' in page.text
        assert "default-src 'self'" in page.headers["content-security-policy"]

    async def test_someone_not_signed_in_is_offered_the_sign_in(self, site: Site) -> None:
        page = await site.client().get("/nothing-here", headers=HTML)
        assert page.status_code == 404
        assert '<a href="/login">Sign in</a>' in page.text
        assert '<nav aria-label="Main">' not in page.text

    async def test_api_clients_and_api_paths_keep_json(self, site: Site) -> None:
        client = site.client()
        for path, headers in [("/no/such/page", {}), ("/api/v1/nothing", HTML), ("/webhooks/nothing", HTML)]:
            answer = await client.get(path, headers=headers)
            assert answer.status_code == 404
            assert answer.json() == {"detail": "Not Found"}

    async def test_a_wrong_method_on_a_page_is_a_405_page(self, site: Site) -> None:
        answer = await site.client().get("/logout", headers=HTML)
        assert answer.status_code == 405
        assert "/logout does not answer GET." in answer.text

    async def test_a_page_error_from_a_route_has_the_navigation_too(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        page = await ada.get("/dead-letters", headers=HTML)
        assert page.status_code == 403
        assert '<nav aria-label="Where to go"' in page.text


class TestUnexpectedErrors:
    async def test_a_browser_gets_a_500_page_and_an_api_client_json(self, site: Site) -> None:
        broken = SiteRouter(site.app.state.error_page)

        @broken.get("/broken")
        async def fail() -> None:
            raise RuntimeError("boom")

        site.app.include_router(broken)
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=site.app, raise_app_exceptions=False), base_url=PUBLIC_URL
        )
        site.clients.append(client)
        answer = await client.get("/broken", headers=HTML)
        assert answer.status_code == 500
        assert "Something went wrong on our side" in answer.text
        assert '<nav aria-label="Where to go"' in answer.text
        answer = await client.get("/broken")
        assert (answer.status_code, answer.json()) == (500, {"detail": "Internal Server Error"})


class TestFavicon:
    async def test_served_at_both_addresses_and_linked(self, site: Site) -> None:
        client = site.client()
        for path in ["/favicon.ico", "/static/favicon.svg"]:
            answer = await client.get(path)
            assert answer.status_code == 200
            assert answer.headers["content-type"] == "image/svg+xml"
            assert answer.text.startswith("<svg")
        assert '<link rel="icon" href="/static/favicon.svg"' in (await client.get("/login")).text
