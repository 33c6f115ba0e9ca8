"""The dashboard in a real browser (headless Chromium, Playwright) on the whole pipeline: signing
in with the development login and with GitHub OAuth against the GitHub test double, changing the
profile, enabling a repository, and starting a thread that completes against the scripted model
while the page follows it live. Each step leaves a screenshot (see :mod:`integration.browser`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, expect

from integration.browser import chromium, screenshot
from tests.e2e.pipeline import REPOSITORY, Stage, pipeline
from tests.fakes.github.identity import identity_of
from tests.fakes.openai_server import Script

TIMEOUT_MS = 60_000


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async for found in chromium():
        yield found


async def new_page(browser: Browser) -> Page:
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(TIMEOUT_MS)
    return page


async def dev_sign_in(page: Page, stage: Stage, login: str, *, admin: bool) -> None:
    await page.goto(f"{stage.dashboard_url}/login")
    await page.get_by_label("Login", exact=True).fill(login)
    if admin:
        await page.get_by_label("Administrator").check()
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Threads")).to_be_visible()


@pytest.mark.timeout(240)
class TestDashboardInABrowser:
    async def test_profile_repository_and_a_thread_followed_live(self, browser: Browser, tmp_path: Path) -> None:
        script = (
            Script()
            .tool_call("execute", command="ls widgets", latency=1.0)
            .tool_call("write_file", file_path="/workspace/widgets/NOTES.md", content="widgets: calc.py\n", latency=1.0)
            .reply("I listed the repository and wrote notes.", latency=1.0)
        )
        async with pipeline(tmp_path, script, dashboard=True) as stage:
            page = await new_page(browser)
            await dev_sign_in(page, stage, "ada", admin=True)
            await screenshot(page, "01-threads-empty")

            await page.get_by_role("link", name="Profile").click()
            await page.get_by_label("Model").select_option("gpt-5")
            await page.get_by_label("Reasoning effort").select_option("high")
            await page.get_by_label("Open pull requests as drafts").check()
            await page.get_by_role("button", name="Save").click()
            await expect(page.get_by_role("status")).to_have_text("Profile saved.")
            await screenshot(page, "02-profile-saved")
            profile = await stage.accounts.profile("dev-ada")
            assert (profile.model, profile.effort, profile.draft_prs) == ("gpt-5", "high", True)

            await page.get_by_role("link", name="Repositories").click()
            row = page.get_by_role("form", name=REPOSITORY)
            await row.get_by_label("reviewer").check()
            await row.get_by_role("button", name="Save").click()
            await expect(page.get_by_role("status")).to_have_text(f"{REPOSITORY} saved.")
            await screenshot(page, "03-repository-enabled")
            settings = await stage.accounts.repository(REPOSITORY)
            assert settings is not None
            assert (settings.coder, settings.reviewer) == (True, True)

            await page.get_by_role("link", name="New thread").click()
            await page.get_by_label("Repository").select_option(REPOSITORY)
            await page.get_by_label("What should the agent do?").fill("List the repository and take notes.")
            await page.get_by_role("button", name="Start").click()
            await expect(page.get_by_role("heading", name="List the repository and take notes.")).to_be_visible()
            await expect(page.locator("#live-status")).to_have_text("(live)")
            await screenshot(page, "04-thread-started")
            events = page.locator("#events li")
            await expect(page.locator("#thread-state .state")).to_have_text("idle", timeout=TIMEOUT_MS)
            await expect(events.filter(has_text="Completed")).to_contain_text(
                "I listed the repository and wrote notes."
            )
            await expect(page.locator("#changed-files")).to_contain_text("/workspace/widgets/NOTES.md")
            await expect(page.locator("#stop-form")).to_be_hidden()
            await expect(page.locator("#sandbox-status")).to_have_text("ready")
            await screenshot(page, "05-thread-completed-live")
            assert await events.count() >= 4
            await page.close()

    async def test_signing_in_with_github(self, browser: Browser, tmp_path: Path) -> None:
        async with pipeline(tmp_path, dashboard=True) as stage:
            identity_of(stage.github.state).add_user("octocat", name="The Octocat", repositories=[REPOSITORY])
            page = await new_page(browser)
            await page.goto(f"{stage.dashboard_url}/threads")
            await expect(page.get_by_role("heading", name="Sign in to Drydock")).to_be_visible()
            await screenshot(page, "06-sign-in")
            await page.get_by_role("link", name="Sign in with GitHub").click()
            await expect(page.get_by_role("heading", name="Authorize Drydock")).to_be_visible()
            await page.get_by_label("Username or email address").fill("octocat")
            await screenshot(page, "07-github-authorize")
            await page.get_by_role("button", name="Authorize").click()
            await expect(page.get_by_role("heading", name="Threads")).to_be_visible()
            await expect(page.locator(".who")).to_have_text("octocat")
            await screenshot(page, "08-signed-in-with-github")
            await page.get_by_role("button", name="Sign out").click()
            await expect(page.get_by_role("status")).to_have_text("You are signed out.")
            await page.close()
