"""Budgets in the dashboard: set in the team defaults and per repository (API and forms), and a
thread paused at a budget continued once by its owner or an administrator, no one else."""

from __future__ import annotations

import uuid

from drydock.accounts import RepositoryBudgets, TeamBudgets
from drydock.budgets import LimitKind, Reached
from drydock.threads import Inbox
from drydock.threads.continuation import Continuations
from tests.dashboard.conftest import REPOSITORY_NAME, Site

BUDGETS = {"run_usd": 2.5, "run_model_calls": 80, "user_day_usd": 20, "repository_day_usd": 50, "active_runs": 4}


class TestTeamBudgets:
    async def test_an_administrator_sets_them_and_everyone_reads_them(self, site: Site) -> None:
        admin, ada = await site.sign_in("root", admin=True), await site.sign_in("ada")
        answer = await admin.send("PUT", "/api/v1/team", {"budgets": BUDGETS})
        assert answer.status_code == 200, answer.text
        assert (await site.accounts.team()).budgets == TeamBudgets.model_validate(BUDGETS)
        assert (await ada.get("/api/v1/team")).json()["budgets"] == BUDGETS

    async def test_a_limit_at_or_below_zero_names_its_field(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        answer = await admin.send("PUT", "/api/v1/team", {"budgets": {"run_usd": 0, "active_runs": -1}})
        assert answer.status_code == 422
        locations = {tuple(error["loc"]) for error in answer.json()["detail"]}
        assert {("body", "budgets", "run_usd"), ("body", "budgets", "active_runs")} <= locations
        assert (await site.accounts.team()).budgets == TeamBudgets()

    async def test_the_team_form_saves_them_and_empty_means_no_limit(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        answer = await admin.form(
            "/team", {"budget_run_usd": "1.5", "budget_active_runs": "3", "budget_user_day_usd": ""}
        )
        assert answer.status_code == 303, answer.text
        assert (await site.accounts.team()).budgets == TeamBudgets(run_usd=1.5, active_runs=3)
        page = await admin.get("/team")
        assert 'name="budget_run_usd" type="number" min="0" step="0.01" value="1.5"' in page.text

    async def test_the_team_form_shows_a_wrong_limit(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        answer = await admin.form("/team", {"budget_run_usd": "lots"})
        assert answer.status_code == 422
        assert "valid number" in answer.text


class TestRepositoryBudgets:
    async def test_a_repository_overrides_the_team(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        body = {"coder": True, "budgets": {"run_usd": 0.5, "repository_day_usd": 10}}
        answer = await admin.send("PUT", f"/api/v1/repositories/{REPOSITORY_NAME}", body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["budgets"] == {"run_usd": 0.5, "run_model_calls": None, "repository_day_usd": 10}
        stored = await site.accounts.repository(REPOSITORY_NAME)
        assert stored is not None
        assert stored.budgets == RepositoryBudgets(run_usd=0.5, repository_day_usd=10)

    async def test_a_team_only_limit_is_refused_on_a_repository(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        body = {"budgets": {"active_runs": 2}}
        answer = await admin.send("PUT", f"/api/v1/repositories/{REPOSITORY_NAME}", body)
        assert answer.status_code == 422
        assert await site.accounts.repository(REPOSITORY_NAME) is None


async def paused_thread(site: Site, owner: str) -> str:
    thread_id = await site.thread(str(uuid.uuid4()), owner=owner)
    reached = Reached(LimitKind.RUN, limit_usd=0.5, spent_usd=0.61)
    await Continuations(site.runtime.redis, site.runtime.keys).pause(thread_id, reached)
    return thread_id


class TestContinue:
    async def test_the_owner_continues_once(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        await site.enable()
        thread_id = await paused_thread(site, ada.user_id)
        page = await ada.get(f"/threads/{thread_id}")
        assert "Paused at this run&#39;s spend limit of $0.50: spent $0.61 in this run." in page.text

        answer = await ada.send("POST", f"/api/v1/threads/{thread_id}/continue")
        assert answer.status_code == 202, answer.text
        continuations = Continuations(site.runtime.redis, site.runtime.keys)
        assert await continuations.paused(thread_id) is None
        grant = await continuations.take_grant(thread_id)
        assert grant is not None
        assert grant.by == "ada"
        messages = await Inbox(site.runtime.bus).read_after(thread_id)
        assert messages[-1].message.text.startswith("Continue (from the dashboard)")

        again = await ada.send("POST", f"/api/v1/threads/{thread_id}/continue")
        assert again.status_code == 409
        assert again.json()["detail"] == "the thread is not paused at a budget"

    async def test_someone_else_is_refused(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        bob = await site.session("user-bob", "bob", repositories=(REPOSITORY_NAME,))
        thread_id = await paused_thread(site, ada.user_id)
        answer = await bob.send("POST", f"/api/v1/threads/{thread_id}/continue")
        assert answer.status_code == 403
        assert "only the thread's owner or an administrator" in answer.json()["detail"]
        assert await Continuations(site.runtime.redis, site.runtime.keys).paused(thread_id) is not None

    async def test_an_administrator_continues_from_the_thread_page(self, site: Site) -> None:
        ada, admin = await site.sign_in("ada"), await site.sign_in("root", admin=True)
        await site.enable()
        thread_id = await paused_thread(site, ada.user_id)
        answer = await admin.form(f"/threads/{thread_id}/continue", {})
        assert answer.status_code == 303, answer.text
        assert await Continuations(site.runtime.redis, site.runtime.keys).paused(thread_id) is None
