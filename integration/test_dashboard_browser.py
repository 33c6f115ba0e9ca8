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
from tests.e2e.test_github_issue import BRANCH, FIX
from tests.fakes.github.history import history_of
from tests.fakes.github.identity import identity_of
from tests.fakes.github.pulls import branch_sha
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
            steps = page.locator("#timeline .steps > li")
            await expect(page.locator("#thread-state .state")).to_have_text("idle", timeout=TIMEOUT_MS)
            await expect(steps.filter(has_text="Completed")).to_contain_text("I listed the repository and wrote notes.")
            await expect(page.locator("#changed-files")).to_contain_text("NOTES.md")
            await expect(page.locator("#stop-form")).to_be_hidden()
            await expect(page.locator("#sandbox-status")).to_have_text("ready")
            await screenshot(page, "05-thread-completed-live")
            assert await steps.count() >= 3
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


@pytest.mark.timeout(240)
class TestTheThreadPage:
    async def test_a_threads_timeline_with_a_follow_up_and_its_run(self, browser: Browser, tmp_path: Path) -> None:
        script = (
            Script()
            .tool_call("execute", command="ls widgets", latency=0.5)
            .reply("The repository has `calc.py` and its tests.\n\n- **add()** looks wrong", latency=0.5)
            .tool_call("execute", command=FIX, latency=1.5)
            .tool_call("write_file", file_path="/workspace/widgets/NOTES.md", content="add() fixed\n", latency=0.5)
            .tool_call("open_pull_request", title="Fix add()", body="Fixes **add()**.", head=BRANCH, latency=0.5)
            .reply("Fixed **add()** and opened a pull request; notes are in `NOTES.md`.", latency=0.5)
        )
        async with pipeline(tmp_path, script, dashboard=True) as stage:
            history = history_of(stage.github.state)
            history.add_check_run(REPOSITORY, "tests", branch_sha(REPOSITORY, BRANCH), "success")
            history.add_check_run(REPOSITORY, "lint", branch_sha(REPOSITORY, BRANCH), None)
            page = await new_page(browser)
            await dev_sign_in(page, stage, "ada", admin=True)
            await page.get_by_role("link", name="New thread").click()
            await page.get_by_label("Repository").select_option(REPOSITORY)
            await page.get_by_label("What should the agent do?").fill("Look at **calc.py**.")
            await page.get_by_role("button", name="Start").click()
            timeline = page.locator("#timeline")
            await expect(timeline.locator(".message").first).to_contain_text("Look at calc.py.")
            await expect(timeline.locator(".message .md strong").first).to_have_text("calc.py")
            first = timeline.locator(".run").nth(0)
            await expect(first.locator(".run-outcome")).to_have_text("completed", timeout=TIMEOUT_MS)
            await expect(first.locator(".event-completed strong")).to_have_text("add()")
            await expect(first.locator(".command")).to_have_text("$ ls widgets")
            await expect(first.locator(".exit")).to_have_text("exit code 0")

            await page.get_by_label("Follow-up").fill("Then fix `add()` and push it.")
            await page.get_by_role("button", name="Send").click()
            await expect(page.locator(".notice")).to_have_text("Message sent.")
            second = timeline.locator(".run").nth(1)
            await expect(page.locator("#working")).to_be_visible(timeout=TIMEOUT_MS)
            await expect(page.locator("#working")).to_contain_text("…")
            await screenshot(page, "09-thread-working")
            await expect(second.locator(".run-outcome")).to_have_text("completed", timeout=TIMEOUT_MS)
            await expect(page.locator("#working")).to_be_hidden()
            await expect(second.locator(".started-by")).to_have_text("started by the message from ada")
            started_by = await second.locator(".started-by a").get_attribute("href")
            follow_up = timeline.locator(f"li{started_by}")
            await expect(follow_up.locator("code")).to_have_text("add()")
            await expect(second.locator(".command")).to_contain_text("sed -i 's/a - b/a + b/' calc.py")
            await expect(second.locator(".exit").first).to_have_text("exit code 0")
            await expect(second.locator(".run-usage")).to_contain_text("4 model calls")
            await expect(second.locator(".run-usage")).to_contain_text("tokens in")
            await expect(second.locator(".run-usage")).to_contain_text(" s")
            await expect(second.locator(".event-completed strong")).to_have_text("add()")
            assert await timeline.locator(".run").count() == 2
            await expect(second.locator(".step-tool dd .md strong")).to_have_text("add()")
            pulls = page.locator("#pull-requests")
            await expect(pulls.locator(".state")).to_have_text("open")
            await expect(pulls.locator(".checks li")).to_have_text(["in_progress lint", "success tests"])
            await page.locator("#changed-files").get_by_role("link", name="calc.py").click()
            await page.locator("#changes details", has_text="calc.py").locator("summary").click()
            await screenshot(page, "10-thread-conversation")
            await page.close()

    async def test_the_diff_view(self, browser: Browser, tmp_path: Path) -> None:
        script = (
            Script()
            .tool_call("execute", command=FIX, latency=0.3)
            .tool_call("write_file", file_path="/workspace/widgets/NOTES.md", content="add() fixed\n", latency=0.3)
            .reply("Fixed **add()**: it added nothing, now it adds.", latency=0.3)
        )
        async with pipeline(tmp_path, script, dashboard=True) as stage:
            page = await new_page(browser)
            await dev_sign_in(page, stage, "ada", admin=True)
            await page.get_by_role("link", name="New thread").click()
            await page.get_by_label("Repository").select_option(REPOSITORY)
            await page.get_by_label("What should the agent do?").fill("Fix add() in calc.py and push a branch.")
            await page.get_by_role("button", name="Start").click()
            await expect(page.locator("#thread-state .state")).to_have_text("idle", timeout=TIMEOUT_MS)
            files = page.locator("#changed-files")
            await expect(files.get_by_role("link", name="calc.py")).to_be_visible()
            await expect(files.get_by_role("link", name="NOTES.md")).to_be_visible()
            await expect(files.locator("li", has_text="calc.py")).to_contain_text("+1 \N{MINUS SIGN}1")
            await files.get_by_role("link", name="calc.py").click()
            diff = page.locator("#changes details", has_text="calc.py")
            await diff.locator("summary").click()
            await expect(diff.locator(".line-del")).to_have_text("-    return a - b\n")
            await expect(diff.locator(".line-add")).to_have_text("+    return a + b\n")
            await expect(page.locator("#changes")).to_contain_text("committed or not")
            await screenshot(page, "11-thread-diff")
            await page.close()
