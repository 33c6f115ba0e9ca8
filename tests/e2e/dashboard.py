"""The dashboard in the pipeline (``pipeline(..., dashboard=True)``): served by uvicorn on a
port chosen before the settings are made (its public URL is part of them), signed in to with
the development login or GitHub OAuth against the GitHub test double."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx

from drydock.config import HttpSettings
from drydock.embedded import free_port
from drydock.http import create_app, serve
from drydock.runtime import Runtime
from services.dashboard import router
from tests.fakes.github import App, FakeGithub
from tests.fakes.github.identity import identity_of
from tests.waiting import eventually


def dashboard_section(github: FakeGithub, app: App) -> dict[str, Any]:
    """``DRYDOCK_DASHBOARD_*`` for a dashboard on a free port, signing in with ``app``'s OAuth client."""
    public_url = f"http://127.0.0.1:{free_port()}"
    client = identity_of(github.state).oauth_client(app, callback_url=f"{public_url}/auth/github/callback")
    return {
        "public_url": public_url,
        "dev_login": True,
        "cookie_secure": False,
        "github_client_id": client.client_id,
        "github_client_secret": client.client_secret,
        "github_web_url": github.base_url,
    }


@contextlib.asynccontextmanager
async def serving_dashboard(runtime: Runtime) -> AsyncIterator[str]:
    """Serve the dashboard at its public URL until the block ends; yields the URL."""
    url = runtime.settings.dashboard.public_url
    port = int(url.rsplit(":", 1)[1])
    http = HttpSettings(port=port, metrics_port=free_port())
    task = asyncio.create_task(serve(create_app("dashboard", runtime, [router]), http))
    try:
        async with httpx.AsyncClient(base_url=url) as client:

            async def healthy() -> bool:
                if task.done():
                    task.result()
                with contextlib.suppress(httpx.TransportError):
                    return (await client.get("/healthz")).status_code == 200
                return False

            await eventually(healthy, within=30, what="the dashboard healthy")
        yield url
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def dev_sign_in(url: str, login: str, *, admin: bool = False) -> tuple[httpx.AsyncClient, str]:
    """A client signed in to the dashboard at ``url`` through the development login, and its CSRF token."""
    client = httpx.AsyncClient(base_url=url, timeout=30)
    page = await client.get("/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token is not None, page.text
    data = {"login": login, "csrf_token": token.group(1)} | ({"admin": "true"} if admin else {})
    answer = await client.post("/auth/dev", data=data)
    assert answer.status_code == 303, answer.text
    return client, (await client.get("/api/v1/me")).json()["csrf_token"]
