"""The dashboard as deployed: a plugin of the CLI, served alone (``drydock serve dashboard``) or
beside the ingress in the web-only process (``drydock serve web``), as a real process."""

from __future__ import annotations

import uuid

import pytest

from drydock import services
from drydock.config import Settings
from services.dashboard import router
from services.web.app import ROUTERS
from tests.ingress.test_service import serving


class TestRegistration:
    def test_the_service_is_registered_and_left_to_web_in_development(self) -> None:
        dashboard = services.get("dashboard")
        assert dashboard.in_dev is False
        assert dashboard.has_http is True
        assert router in ROUTERS


@pytest.mark.timeout(90)
@pytest.mark.parametrize("service", ["dashboard", "web"])
async def test_a_served_process_answers_pages_and_the_api(service: str, settings: Settings) -> None:
    async with serving(service, settings, f"test-{uuid.uuid4().hex[:8]}") as (client, _):
        login = await client.get("/login")
        assert login.status_code == 200
        assert "Sign in to Drydock" in login.text
        assert (await client.get("/api/v1/me")).status_code == 401
        assert (await client.get("/openapi.json")).json()["paths"]["/api/v1/threads"]
        if service == "web":
            assert (await client.get("/webhooks/github")).status_code == 405
