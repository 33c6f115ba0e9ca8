"""The thread owner's approvals on the dashboard: ``/api/v1/threads/{id}/approvals`` shows the
held plan and held pushes to whoever may see the thread; ``…/approve`` (and the thread page's
approve form) approves them for the thread's owner only, records an ``approved`` event and
wakes the coder with a message."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from drydock.bus import EventType, RunEvent
from drydock.bus.streams import EVENTS_STREAM
from drydock.infra.server_keys import ServerKeys
from drydock.threads import Inbox
from drydock.threads.approvals import Approvals, PushHold, RefUpdate, State, change_id
from tests.dashboard.conftest import Site

REPOSITORY = "acme/widgets"


def approvals_of(site: Site) -> Approvals:
    return Approvals(site.runtime.redis, site.runtime.keys, ServerKeys.from_settings(site.settings.crypto))


async def held(site: Site, thread_id: str) -> tuple[Approvals, str]:
    """A thread with a held plan and one held push; returns the push's change id."""
    approvals = approvals_of(site)
    await approvals.submit_plan(thread_id, "Pin the compiler", [{"content": "edit ci.yml", "status": "pending"}])
    update = RefUpdate("a" * 40, "b" * 40, "refs/heads/drydock/ci")
    change = change_id(REPOSITORY, [update])
    hold = PushHold(
        thread_id, change, REPOSITORY, (update,), (".github/workflows/ci.yml",), State.HELD, datetime.now(UTC)
    )
    await approvals.hold(hold)
    return approvals, change


class TestApprovalsApi:
    async def test_the_owner_approves_the_plan_and_pushes(self, site: Site) -> None:
        thread_id = await site.thread(str(uuid.uuid4()), owner="gh-2")
        approvals, change = await held(site, thread_id)
        bob = await site.session("gh-2", "bob")
        shown = (await bob.get(f"/api/v1/threads/{thread_id}/approvals")).json()
        assert (shown["plan"]["revision"], shown["plan"]["state"], shown["may_approve"]) == (1, "held", True)
        assert [(p["change"], p["paths"]) for p in shown["pushes"]] == [(change, [".github/workflows/ci.yml"])]

        answer = await bob.send("POST", f"/api/v1/threads/{thread_id}/approve", {})
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"plan": 1, "pushes": [change]}
        assert await approvals.pending(thread_id) == (None, [])
        stored = await site.runtime.bus.js.get_last_msg(
            EVENTS_STREAM, f"drydock.event.{thread_id}.{EventType.APPROVED}"
        )
        assert stored.data is not None
        assert RunEvent.model_validate_json(stored.data).data["via"] == "dashboard"
        (message,) = [stored.message for stored in await Inbox(site.runtime.bus).read_after(thread_id)]
        assert message.text.startswith("Approved: plan revision 1")
        again = await bob.send("POST", f"/api/v1/threads/{thread_id}/approve", {})
        assert again.json() == {"plan": None, "pushes": []}

    async def test_one_push_by_its_change_id(self, site: Site) -> None:
        thread_id = await site.thread(str(uuid.uuid4()), owner="gh-2")
        approvals, change = await held(site, thread_id)
        bob = await site.session("gh-2", "bob")
        answer = await bob.send("POST", f"/api/v1/threads/{thread_id}/approve", {"change": change})
        assert answer.json() == {"plan": None, "pushes": [change]}
        plan, holds = await approvals.pending(thread_id)
        assert plan is not None
        assert holds == []

    async def test_a_non_owner_may_see_but_not_approve(self, site: Site) -> None:
        thread_id = await site.thread(str(uuid.uuid4()), owner="gh-2")
        approvals, _ = await held(site, thread_id)
        admin = await site.session("gh-9", "root", admin=True)
        assert (await admin.get(f"/api/v1/threads/{thread_id}/approvals")).json()["may_approve"] is False
        refused = await admin.send("POST", f"/api/v1/threads/{thread_id}/approve", {})
        assert refused.status_code == 403
        assert "only this thread's owner" in refused.text
        plan, holds = await approvals.pending(thread_id)
        assert plan is not None
        assert len(holds) == 1

    async def test_a_malformed_change_id_is_422(self, site: Site) -> None:
        thread_id = await site.thread(str(uuid.uuid4()), owner="gh-2")
        bob = await site.session("gh-2", "bob")
        answer = await bob.send("POST", f"/api/v1/threads/{thread_id}/approve", {"change": "not-a-change"})
        assert answer.status_code == 422


class TestThreadPage:
    async def test_the_page_shows_what_is_held_and_approves_it(self, site: Site) -> None:
        thread_id = await site.thread(str(uuid.uuid4()), owner="dev-ada")
        approvals, change = await held(site, thread_id)
        ada = await site.sign_in("ada")
        page = await ada.get(f"/threads/{thread_id}")
        assert "Plan, revision 1" in page.text
        assert "<code>.github/workflows/ci.yml</code>" in page.text
        assert "Approve the plan" in page.text
        approved = await ada.form(f"/threads/{thread_id}/approve", {"change": change})
        assert approved.status_code == 303
        plan, holds = await approvals.pending(thread_id)
        assert plan is not None
        assert holds == []
        await ada.form(f"/threads/{thread_id}/approve", {})
        assert await approvals.pending(thread_id) == (None, [])
