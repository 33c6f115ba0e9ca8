"""The usage page and ``/api/v1/usage``: spend and runs per day by repository, user and model,
the biggest threads, the budgets with today's use, and a cost of unknown price shown as unknown."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from drydock.accounts import RepositoryBudgets, RepositorySettings, TeamBudgets, TeamDefaults
from drydock.usage import CallUsage, UsageLedger, UsageScope
from tests.dashboard.conftest import REPOSITORY_NAME, Site


async def record(
    site: Site,
    *,
    thread: str,
    repository: str,
    user: str,
    model: str,
    cost: float | None,
    days_ago: int = 0,
    first: bool = True,
) -> None:
    ledger = UsageLedger(site.runtime.redis, site.runtime.keys)
    scope = UsageScope(run_id=uuid.uuid4().hex, thread_id=thread, role="coder", user_id=user, repository=repository)
    call = CallUsage(model, 10_000, 2_000, 500, 100, cost)
    await ledger.add(scope, call, at=datetime.now(UTC) - timedelta(days=days_ago), first=first)


class TestUsageApi:
    async def test_spend_and_runs_per_day_by_repository(self, site: Site) -> None:
        await site.enable()
        await site.enable("acme/gadgets")
        ada = await site.sign_in("ada")
        big, small = str(uuid.uuid4()), str(uuid.uuid4())
        await site.thread(big, owner=ada.user_id)
        await record(site, thread=big, repository=REPOSITORY_NAME, user=ada.user_id, model="gpt-5.1", cost=1.5)
        await record(
            site, thread=big, repository=REPOSITORY_NAME, user=ada.user_id, model="gpt-5.1", cost=0.5, first=False
        )
        await record(
            site, thread=small, repository="acme/gadgets", user=ada.user_id, model="gpt-5.1", cost=0.25, days_ago=2
        )

        answer = await ada.get("/api/v1/usage", params={"by": "repository", "days": 7})
        assert answer.status_code == 200, answer.text
        report = answer.json()
        assert len(report["days"]) == 7
        widgets, gadgets = report["members"]
        assert (widgets["name"], widgets["total"]["cost_usd"], widgets["total"]["runs"]) == (REPOSITORY_NAME, 2.0, 1)
        assert widgets["total"]["calls"] == 2
        assert [day["cost_usd"] for day in gadgets["days"]][-3] == 0.25
        assert report["total_days"][-1]["runs"] == 1
        assert [thread["thread_id"] for thread in report["threads"]] == [big, small]
        assert report["threads"][0]["title"] == f"{REPOSITORY_NAME}#7"

    async def test_a_model_without_a_known_price_has_an_unknown_cost(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        thread = str(uuid.uuid4())
        await record(site, thread=thread, repository=REPOSITORY_NAME, user=ada.user_id, model="local-llm", cost=None)
        await record(
            site, thread=thread, repository=REPOSITORY_NAME, user=ada.user_id, model="gpt-5.1", cost=0.3, first=False
        )

        report = (await ada.get("/api/v1/usage", params={"by": "model"})).json()
        costs = {member["name"]: member["total"]["cost_usd"] for member in report["members"]}
        assert costs == {"gpt-5.1": 0.3, "local-llm": None}
        repository = (await ada.get("/api/v1/usage")).json()["members"][0]["total"]
        assert (repository["cost_usd"], repository["priced_cost_usd"], repository["unpriced_calls"]) == (None, 0.3, 1)

        page = await ada.get("/usage", params={"by": "model"})
        assert page.status_code == 200
        assert '<th scope="row">local-llm</th><td class="num"><span class="unknown-cost"' in page.text
        assert ">unknown</span>" in page.text
        assert "$0.30 + unknown" in (await ada.get("/usage")).text

    async def test_the_budgets_show_how_close_today_is(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        await site.accounts.save_team(TeamDefaults(budgets=TeamBudgets(user_day_usd=4.0, active_runs=3)))
        await site.accounts.save_repository(
            RepositorySettings(full_name=REPOSITORY_NAME, budgets=RepositoryBudgets(repository_day_usd=10.0))
        )
        await record(site, thread="t", repository=REPOSITORY_NAME, user=ada.user_id, model="gpt-5.1", cost=3.0)

        budgets = (await ada.get("/api/v1/usage")).json()["budgets"]
        assert budgets == [
            {"limit": "user ada per day", "used": 3.0, "allowed": 4.0, "unit": "usd", "unpriced_calls": 0},
            {
                "limit": f"repository {REPOSITORY_NAME} per day",
                "used": 3.0,
                "allowed": 10.0,
                "unit": "usd",
                "unpriced_calls": 0,
            },
            {"limit": "runs at once in the team", "used": 0.0, "allowed": 3.0, "unit": "runs", "unpriced_calls": 0},
        ]
        page = (await ada.get("/usage")).text
        assert "$3.00 of $4.00" in page
        assert "(75%)" in page

    async def test_what_a_member_may_not_see_is_shown_without_names(self, site: Site) -> None:
        await site.enable()
        await site.accounts.save_team(TeamDefaults(budgets=TeamBudgets(active_runs=3)))
        await site.accounts.save_repository(
            RepositorySettings(full_name="acme/merger", budgets=RepositoryBudgets(repository_day_usd=10.0))
        )
        bob = await site.session("gh-2", "bob", repositories=(REPOSITORY_NAME,))
        secret, own = str(uuid.uuid4()), str(uuid.uuid4())
        await site.thread(secret, owner="gh-3", repository="acme/merger")
        await site.thread(own, owner=bob.user_id, repository="acme/merger")
        await record(site, thread=secret, repository="acme/merger", user="gh-3", model="gpt-5.1", cost=3.0)
        await record(site, thread=own, repository="acme/merger", user=bob.user_id, model="gpt-5.1", cost=2.0)
        await record(site, thread="w", repository=REPOSITORY_NAME, user=bob.user_id, model="gpt-5.1", cost=1.0)

        report = (await bob.get("/api/v1/usage")).json()
        members = {member["label"]: member["total"]["cost_usd"] for member in report["members"]}
        assert members == {"repositories you cannot see": 5.0, REPOSITORY_NAME: 1.0}
        threads = {row["thread_id"]: row for row in report["threads"]}
        assert (threads[secret]["title"], threads[secret]["repository"], threads[secret]["visible"]) == (
            "a thread you cannot see", None, False,
        )  # fmt: skip
        assert (threads[own]["title"], threads[own]["visible"]) == ("acme/merger#7", True)
        assert [budget["limit"] for budget in report["budgets"]] == ["runs at once in the team"]
        page = (await bob.get("/usage")).text
        assert "a thread you cannot see" in page
        assert f'href="/threads/{secret}"' not in page

        admin = await site.session("gh-1", "root", admin=True)
        report = (await admin.get("/api/v1/usage")).json()
        assert {member["label"] for member in report["members"]} == {"acme/merger", REPOSITORY_NAME}
        assert all(row["visible"] for row in report["threads"])
        assert len(report["budgets"]) == 2

    async def test_an_unknown_grouping_is_a_422(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.get("/api/v1/usage", params={"by": "colour"})
        assert answer.status_code == 422
        assert answer.json()["detail"][0]["loc"] == ["query", "by"]
        too_long = await ada.get("/api/v1/usage", params={"days": 5000})
        assert too_long.status_code == 422


class TestUsageChart:
    async def test_the_page_draws_the_days_as_svg(self, site: Site) -> None:
        ada = await site.sign_in("ada", admin=True)
        await record(site, thread="t1", repository=REPOSITORY_NAME, user=ada.user_id, model="gpt-5.1", cost=1.0)
        await record(site, thread="t2", repository="acme/<gadgets>", user=ada.user_id, model="gpt-5.1", cost=2.0)
        page = await ada.get("/usage", params={"days": 7})
        assert page.status_code == 200
        assert '<svg class="usage-chart"' in page.text
        assert page.text.count('<rect x="') >= 4  # two segments and two legend swatches
        assert "acme/&lt;gadgets&gt;" in page.text
        assert "<gadgets>" not in page.text
        assert '<a href="/usage" aria-current="page">Usage</a>' in page.text
