"""The usage page in a real browser (headless Chromium, Playwright) on the whole pipeline: an
administrator sets the team's budgets on the team page, a run on the scripted model is counted,
and the usage page draws the days (a run today, earlier days of several repositories and
models, one without a known price) with the biggest threads and the budgets. Its screenshot is
an artifact (:mod:`integration.browser`); with ``DRYDOCK_TEST_UPDATE_DOCS=1`` it also replaces
``docs/screenshots/usage.png`` (the dates change every day, so only on purpose)."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, expect

from drydock.accounts import RepositorySettings
from drydock.budgets import ActiveRuns
from drydock.bus import EventType
from drydock.threads import ids
from drydock.usage import CallUsage, UsageLedger, UsageScope
from integration.browser import chromium, screenshot
from tests.e2e.pipeline import MEMBER, ORG, REPOSITORY, Stage, pipeline
from tests.fakes.github import webhooks
from tests.fakes.github.activity import activity_of
from tests.fakes.openai_server import Script
from tests.waiting import eventually

TIMEOUT_MS = 60_000
DOCS_SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "screenshots" / "usage.png"
ISSUE = 42
EARLIER = [
    # (days ago, repository, user, model, cost; None: no known price)
    (6, "acme/widgets", "dev-ada", "gpt-5.1", 0.42),
    (5, "acme/gadgets", "dev-ada", "gpt-5-mini", 0.12),
    (5, "acme/widgets", "dev-bob", "gpt-5.1", 0.85),
    (4, "acme/gizmos", "dev-bob", "gpt-5.1", 0.31),
    (3, "acme/widgets", "dev-ada", "local-llm", None),
    (3, "acme/gadgets", "dev-bob", "gpt-5.1", 0.64),
    (2, "acme/widgets", "dev-ada", "gpt-5.1", 1.10),
    (1, "acme/gizmos", "dev-ada", "gpt-5-mini", 0.08),
    (1, "acme/widgets", "dev-bob", "gpt-5.1", 0.55),
]


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async for found in chromium():
        yield found


async def seed_earlier_days(stage: Stage) -> None:
    ledger = UsageLedger(stage.runtime.redis, stage.runtime.keys)
    for days_ago, repository, user, model, cost in EARLIER:
        thread = str(uuid.uuid4())
        scope = UsageScope(run_id=uuid.uuid4().hex, thread_id=thread, role="coder", user_id=user, repository=repository)
        at = datetime.now(UTC) - timedelta(days=days_ago)
        for call in range(3):
            usage = CallUsage(model, 40_000, 10_000, 1_500, 300, None if cost is None else cost / 3)
            await ledger.add(scope, usage, at=at, first=call == 0)


async def run_once(stage: Stage) -> None:
    comment = activity_of(stage.github.state).add_comment(REPOSITORY, ISSUE, "@drydock tidy up", login=MEMBER)
    payload = webhooks.issue_comment(
        ORG, "widgets", ISSUE, "@drydock tidy up", author=webhooks.user(MEMBER, 7001),
        comment_id=comment.id, installation_id=stage.installation.id,
    )  # fmt: skip
    await stage.deliver_github("issue_comment", payload)
    thread = ids.github_issue("github.com", ORG, "widgets", ISSUE)

    async def completed() -> bool:
        return any(event.type is EventType.COMPLETED for event in await stage.events(thread))

    await eventually(completed, within=90, what="the run")
    active = ActiveRuns(stage.runtime.redis, stage.runtime.keys)

    async def place_given_back() -> bool:
        return await active.count() == 0

    await eventually(place_given_back, within=30, what="the run's place given back")


async def new_page(browser: Browser) -> Page:
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(TIMEOUT_MS)
    return page


@pytest.mark.timeout(240)
class TestUsagePageInABrowser:
    async def test_budgets_set_on_the_team_page_and_the_usage_drawn(self, browser: Browser, tmp_path: Path) -> None:
        script = (
            Script()
            .tool_call("execute", command="ls widgets")
            .usage(prompt=120_000, completion=2_000, cached=40_000)
            .reply("Tidied.")
            .usage(prompt=130_000, completion=800)
        )
        async with pipeline(tmp_path, script, dashboard=True) as stage:
            for name in ("acme/gadgets", "acme/gizmos"):
                await stage.accounts.save_repository(RepositorySettings(full_name=name))
            await seed_earlier_days(stage)
            page = await new_page(browser)
            await page.goto(f"{stage.dashboard_url}/login")
            await page.get_by_label("Login", exact=True).fill("ada")
            await page.get_by_label("Administrator").check()
            await page.get_by_role("button", name="Sign in").click()

            await page.get_by_role("link", name="Team").click()
            await page.get_by_label("Spend per run").fill("2")
            await page.get_by_label("Spend per user per day").fill("5")
            await page.get_by_label("Spend per repository per day").fill("3")
            await page.get_by_label("Runs at once in the team").fill("4")
            await page.get_by_role("button", name="Save").click()
            await expect(page.get_by_role("status")).to_have_text("Team defaults saved.")
            budgets = (await stage.accounts.team()).budgets
            assert (budgets.run_usd, budgets.user_day_usd, budgets.active_runs) == (2.0, 5.0, 4)

            await run_once(stage)

            await page.get_by_role("link", name="Usage").click()
            await expect(page.get_by_role("heading", name="Usage", exact=True)).to_be_visible()
            chart = page.get_by_role("img", name="Spend per day by repository")
            await expect(chart).to_be_visible()
            box = await chart.bounding_box()
            assert box is not None
            assert box["width"] > 600
            rows = page.get_by_role("table").first.get_by_role("row")
            await expect(rows.filter(has_text=REPOSITORY)).to_contain_text("+ unknown")
            await expect(page.get_by_role("link", name=f"{REPOSITORY}#{ISSUE}")).to_be_visible()
            await expect(page.get_by_role("row").filter(has_text=f"repository {REPOSITORY} per day")).to_contain_text(
                "of $3.00"
            )
            await expect(page.get_by_role("row").filter(has_text="runs at once in the team")).to_contain_text(
                "0 of 4 runs"
            )
            await page.get_by_role("combobox", name="Days").select_option("7")
            await page.get_by_role("button", name="Show").click()
            await expect(page.locator("svg.usage-chart rect[fill='url(#unknown)']")).to_have_count(1)
            shot = await screenshot(page, "usage-by-repository")

            await page.get_by_role("combobox", name="By").select_option("model")
            await page.get_by_role("button", name="Show").click()
            await expect(page.get_by_role("row").filter(has_text="local-llm")).to_contain_text("unknown")
            await screenshot(page, "usage-by-model")
            await page.close()

            assert shot.stat().st_size < 300_000
            if os.environ.get("DRYDOCK_TEST_UPDATE_DOCS") == "1":
                DOCS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(shot, DOCS_SCREENSHOT)
