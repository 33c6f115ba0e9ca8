"""The dashboard's first hour in a real browser (headless Chromium, Playwright): the first
sign-in on a fresh ``drydock dev`` (the real process, as ``pdm run dev`` starts it), enabling a
repository by name with a form that keeps a bad value and marks it, the bundled API documentation
with no request leaving the machine; and on the whole pipeline, the thread list following a thread
from running to completed without a reload, and the list on a phone. With
``DRYDOCK_TEST_UPDATE_DOCS=1`` the list's screenshots are copied into ``docs/screenshots/`` too
(``list-running.png``, ``list.png``, ``list-phone.png``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.async_api import Browser, Page, Request, expect

from drydock.embedded import free_port
from integration.browser import chromium, screenshot
from tests.e2e.pipeline import REPOSITORY, pipeline
from tests.fakes.openai_server import Script
from tests.waiting import eventually

TIMEOUT_MS = 60_000
READY_WITHIN = 150
SCREENSHOTS = Path(__file__).parent.parent / "docs" / "screenshots"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async for found in chromium():
        yield found


@contextlib.asynccontextmanager
async def drydock_dev(directory: Path) -> AsyncIterator[str]:
    """``python -m drydock dev`` in ``directory`` (a fresh clone's state: no ``DRYDOCK_`` variable
    but free ports and the sandbox root); its web URL once it says ready; Ctrl-C at the end."""
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DRYDOCK_")}
    environment |= {
        "DRYDOCK_HTTP_PORT": str(port),
        "DRYDOCK_HTTP_METRICS_PORT": str(free_port()),
        "DRYDOCK_SANDBOX_LOCAL_ROOT": str(directory / "sandboxes"),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "drydock", "dev", env=environment, cwd=directory,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert process.stdout is not None
    output: list[str] = []
    try:
        try:
            async with asyncio.timeout(READY_WITHIN):
                while not any("ready; Ctrl-C stops everything" in line for line in output):
                    line = (await process.stdout.readline()).decode()
                    assert line, "drydock dev exited early:\n" + "".join(output)
                    output.append(line)
        except TimeoutError:
            pytest.fail(f"drydock dev was not ready within {READY_WITHIN} s:\n" + "".join(output))
        # Keep reading, so that a full pipe never blocks the process.
        drain = asyncio.create_task(process.stdout.read())
        yield f"http://127.0.0.1:{port}"
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), 60) == 0, (await drain).decode()
        await drain
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def loopback_only(page: Page) -> list[str]:
    """The URLs of the page's requests that leave the machine (filled as the page loads)."""
    outside: list[str] = []

    def seen(request: Request) -> None:
        url = urlsplit(request.url)
        if url.scheme not in {"data", "blob", "about"} and url.hostname not in LOOPBACK:
            outside.append(request.url)

    page.on("request", seen)
    return outside


async def keep(page: Page, name: str) -> Path:
    """A screenshot as a test artifact (kept below 300 KB), and in ``docs/screenshots/`` when asked."""
    path = await screenshot(page, name)
    assert path.stat().st_size < 300_000, f"{name}.png is {path.stat().st_size} bytes"
    if os.environ.get("DRYDOCK_TEST_UPDATE_DOCS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, SCREENSHOTS / f"{name}.png")
    return path


@pytest.mark.timeout(300)
class TestFreshDev:
    async def test_first_sign_in_a_repository_by_name_and_the_api_docs(self, browser: Browser, tmp_path: Path) -> None:
        async with drydock_dev(tmp_path) as url:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(TIMEOUT_MS)
            outside = loopback_only(page)

            await page.goto(f"{url}/threads")
            await expect(page.get_by_role("heading", name="Sign in to Drydock")).to_be_visible()
            await expect(page.get_by_role("heading", name="Development login")).to_be_visible()
            await screenshot(page, "first-hour-01-sign-in")
            await page.get_by_label("Login", exact=True).fill("ada")
            await page.get_by_label("Administrator").check()
            await page.get_by_role("button", name="Sign in").click()
            await expect(page.get_by_role("heading", name="Threads")).to_be_visible()
            await expect(page.locator(".who")).to_contain_text("ada")

            await page.get_by_role("link", name="Repositories").click()
            field = page.get_by_role("textbox", name="Repository")
            await field.fill("acme widgets")
            adding = page.get_by_role("form", name="Enable a repository by name")
            await adding.get_by_label("reviewer").check()
            await page.get_by_role("button", name="Enable").click()
            await expect(field).to_have_attribute("aria-invalid", "true")
            await expect(field).to_have_value("acme widgets")
            await expect(page.locator("#full_name-error")).to_contain_text("owner/name")
            await expect(adding.get_by_label("reviewer")).to_be_checked()
            await screenshot(page, "first-hour-02-repository-name-refused")
            await field.fill("acme/widgets")
            await page.get_by_role("button", name="Enable").click()
            await expect(page.locator(".notice")).to_have_text("acme/widgets enabled.")
            row = page.get_by_role("form", name="acme/widgets")
            await expect(row.get_by_label("enabled")).to_be_checked()
            await expect(row.get_by_label("reviewer")).to_be_checked()
            await screenshot(page, "first-hour-03-repository-enabled")
            await page.get_by_role("link", name="New thread").click()
            await expect(page.get_by_label("Repository")).to_have_value("acme/widgets")

            await page.get_by_role("navigation", name="Main").get_by_role("link", name="API").click()
            await expect(page.locator(".swagger-ui .info .title")).to_contain_text("Drydock web")
            await expect(
                page.locator(".opblock-summary-path").filter(has_text="/api/v1/repositories").first
            ).to_be_visible()
            await screenshot(page, "first-hour-04-api-docs")

            answer = await page.goto(f"{url}/no/such/page")
            assert answer is not None
            assert answer.status == 404
            await expect(page.get_by_role("heading", name="Not found")).to_be_visible()
            await expect(page.get_by_role("navigation", name="Main")).to_be_visible()
            assert outside == [], f"requests left the machine: {outside}"
            await page.close()


@pytest.mark.timeout(300)
class TestLiveList:
    async def test_a_thread_moves_from_running_to_completed_without_a_reload(
        self, browser: Browser, tmp_path: Path
    ) -> None:
        script = (
            Script()
            .tool_call("execute", command="ls widgets", latency=2.0)
            .tool_call("write_file", file_path="/workspace/widgets/NOTES.md", content="widgets: calc.py\n", latency=2.0)
            .reply("I listed the repository and wrote notes.", latency=2.0)
        )
        async with pipeline(tmp_path, script, dashboard=True) as stage:
            context = await browser.new_context(viewport={"width": 1280, "height": 800})
            page = await context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            await page.goto(f"{stage.dashboard_url}/login")
            await page.get_by_label("Login", exact=True).fill("ada")
            await page.get_by_label("Administrator").check()
            await page.get_by_role("button", name="Sign in").click()
            await expect(page.get_by_role("heading", name="Threads")).to_be_visible()
            await expect(page.locator("#list-status")).to_have_text("This list updates live.")
            await page.evaluate("window.drydockNotReloaded = true")

            starter = await page.context.new_page()
            starter.set_default_timeout(TIMEOUT_MS)
            await starter.goto(f"{stage.dashboard_url}/threads/new")
            await starter.get_by_label("Repository").select_option(REPOSITORY)
            await starter.get_by_label("What should the agent do?").fill("List the repository and take notes.")
            await starter.get_by_role("button", name="Start").click()
            await expect(starter.get_by_role("heading", name="List the repository and take notes.")).to_be_visible()
            await starter.close()

            row = page.locator("tr[data-thread]").filter(has_text="List the repository and take notes.")
            state = row.locator('td[data-label="State"] .state')
            await expect(state).to_have_text("running", timeout=TIMEOUT_MS)
            await keep(page, "list-running")
            await expect(state).to_have_text("completed", timeout=TIMEOUT_MS)
            await expect(row.locator('td[data-label="Last run"] .state')).to_have_text("completed")
            await expect(row.locator('td[data-label="Last activity"] time')).not_to_be_empty()
            assert await page.evaluate("window.drydockNotReloaded === true")
            await keep(page, "list")

            phone = await context.new_page()
            phone.set_default_timeout(TIMEOUT_MS)
            await phone.set_viewport_size({"width": 390, "height": 844})
            await phone.goto(f"{stage.dashboard_url}/threads")
            phone_row = phone.locator("tr[data-thread]").first
            await expect(phone_row.locator('td[data-label="State"] .state')).to_have_text("completed")
            widths = await phone.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            assert widths[0] <= widths[1], f"the page is {widths[0]} px wide on a {widths[1]} px screen"
            # The live list may re-render the row as its last events arrive: measure the row on screen.
            box = await eventually(phone_row.bounding_box, within=TIMEOUT_MS / 1000, what="the row on the phone")
            assert box["width"] <= 390
            await keep(phone, "list-phone")
            await context.close()
