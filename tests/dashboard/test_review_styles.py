"""``/api/v1/review-styles``: the review guidelines of the repositories a person may see, their
versions, and (administrators) editing, approving, rejecting and asking for a bootstrap."""

from __future__ import annotations

import uuid

import pytest

from drydock.bus import EventType, Wake, subjects
from drydock.bus.streams import RUNS_STREAM
from drydock.review.analysis import analyzer_thread
from drydock.review.guidelines import Guideline, GuidelinesStore, Provenance
from drydock.roles import Role
from drydock.threads import Inbox
from tests.dashboard.conftest import Site


def store(site: Site) -> GuidelinesStore:
    return GuidelinesStore(site.runtime.redis, site.runtime.keys, host="github.com")


async def learned(site: Site, repository: str = "acme/widgets") -> int:
    """A version the analyzer saved (pending approval)."""
    rules = [Guideline(text="Name tests after the behaviour.", category="tests"), Guideline(text="No print().")]
    return await store(site).save(repository, rules, Provenance(mode="bootstrap", summary="From 30 comments."))


class TestReading:
    async def test_the_overview_lists_what_a_person_may_see(self, site: Site) -> None:
        await site.enable("acme/widgets", reviewer=True)
        await site.enable("acme/secret")
        await learned(site)
        bob = await site.session("gh-2", "bob", repositories=("acme/widgets",))
        answer = await bob.get("/api/v1/review-styles")
        assert answer.json() == [
            {
                "repository": "acme/widgets",
                "reviewer": True,
                "current": None,
                "latest": 1,
                "pending": 1,
                "analyzer": None,
            }
        ]

    async def test_one_repository_with_its_versions(self, site: Site) -> None:
        await site.enable()
        version = await learned(site)
        bob = await site.session("gh-2", "bob", repositories=("acme/widgets",))
        body = (await bob.get("/api/v1/review-styles/acme/widgets")).json()
        assert (body["repository"], body["current"], body["bootstrap"]) == ("acme/widgets", None, None)
        [stored] = body["versions"]
        assert (stored["version"], stored["mode"], stored["approval"], stored["summary"]) == (
            version, "bootstrap", "pending", "From 30 comments.",
        )  # fmt: skip
        assert stored["rules"][0] == {"text": "Name tests after the behaviour.", "category": "tests", "sources": 0}
        assert (await bob.get(f"/api/v1/review-styles/acme/widgets/versions/{version}")).json() == stored

    async def test_unknown_and_invisible(self, site: Site) -> None:
        await site.enable("acme/secret")
        bob = await site.session("gh-2", "bob")
        assert (await bob.get("/api/v1/review-styles/acme/nothing")).status_code == 404
        assert (await bob.get("/api/v1/review-styles/acme/secret")).status_code == 403
        admin = await site.session("gh-1", "root", admin=True)
        assert (await admin.get("/api/v1/review-styles/acme/secret/versions/9")).status_code == 404


class TestDecisions:
    async def test_approving_makes_a_version_current_and_rejecting_keeps_the_old_one(self, site: Site) -> None:
        await site.enable()
        first, second = await learned(site), await learned(site)
        admin = await site.session("gh-1", "root", admin=True)
        answer = await admin.send(
            "POST", f"/api/v1/review-styles/acme/widgets/versions/{first}/approve", {"note": "ok"}
        )
        assert answer.status_code == 200, answer.text
        assert (answer.json()["approval"], answer.json()["approved_by"], answer.json()["note"]) == (
            "approved",
            "root",
            "ok",
        )
        await admin.send("POST", f"/api/v1/review-styles/acme/widgets/versions/{second}/reject", {})
        assert (await store(site).current("acme/widgets")).version == first  # type: ignore[union-attr]

    async def test_an_edit_is_a_new_version_its_author_approved(self, site: Site) -> None:
        await site.enable()
        base = await learned(site)
        admin = await site.session("gh-1", "root", admin=True)
        answer = await admin.send(
            "POST",
            "/api/v1/review-styles/acme/widgets/versions",
            {"rules": [{"text": "Prefer pathlib.", "category": "style"}], "based_on": base},
        )
        assert answer.status_code == 201, answer.text
        edited = answer.json()
        assert (edited["mode"], edited["edited_by"], edited["based_on"], edited["approval"]) == (
            "edit",
            "root",
            base,
            "approved",
        )
        assert (await admin.get("/api/v1/review-styles/acme/widgets")).json()["current"] == edited["version"]

    async def test_wrong_input(self, site: Site) -> None:
        await site.enable()
        admin = await site.session("gh-1", "root", admin=True)
        url = "/api/v1/review-styles/acme/widgets/versions"
        assert (await admin.send("POST", url, {"rules": []})).status_code == 422
        assert (await admin.send("POST", url, {"rules": [{"text": "x"}], "based_on": 42})).status_code == 422
        assert (await admin.send("POST", f"{url}/42/approve", {})).status_code == 404
        assert (await admin.send("POST", f"{url}/0/approve", {})).status_code == 422

    async def test_only_administrators_decide(self, site: Site) -> None:
        await site.enable()
        version = await learned(site)
        bob = await site.session("gh-2", "bob", repositories=("acme/widgets",))
        url = "/api/v1/review-styles/acme/widgets"
        assert (await bob.send("POST", f"{url}/versions/{version}/approve", {})).status_code == 403
        assert (await bob.send("POST", f"{url}/versions", {"rules": [{"text": "x"}]})).status_code == 403
        assert (await bob.send("POST", f"{url}/bootstrap")).status_code == 403
        assert (await store(site).get("acme/widgets", version)).approval.state.value == "pending"  # type: ignore[union-attr]


class TestBootstrap:
    async def test_asking_for_a_bootstrap_wakes_the_analyzer(self, site: Site) -> None:
        # The analyzer's thread id is derived from the repository: a name of this test's own.
        repository = f"acme/w{uuid.uuid4().hex[:8]}"
        await site.enable(repository)
        admin = await site.session("gh-1", "root", admin=True)
        answer = await admin.send("POST", f"/api/v1/review-styles/{repository}/bootstrap")
        assert answer.status_code == 202, answer.text
        thread_id = answer.json()["thread_id"]
        assert thread_id == analyzer_thread("github.com", repository)
        [stored] = await Inbox(site.runtime.bus).read_after(thread_id)
        assert stored.message.references["mode"] == "bootstrap"
        raw = await site.runtime.bus.js.get_last_msg(RUNS_STREAM, subjects.run(Role.ANALYZER, thread_id))
        assert raw.data is not None
        assert Wake.model_validate_json(raw.data).role is Role.ANALYZER


class TestAnalyzerState:
    async def test_never_asked(self, site: Site) -> None:
        await site.enable(reviewer=True)
        admin = await site.sign_in("root", admin=True)
        assert (await admin.get("/api/v1/review-styles/acme/widgets")).json()["analyzer"] is None
        assert (
            'The analyzer: <span class="hint">never asked</span>'
            in (await admin.get("/review-styles/acme/widgets")).text
        )

    @pytest.mark.parametrize(
        ("events", "state"),
        [
            ((), "queued"),
            ((EventType.STARTED,), "running"),
            ((EventType.STARTED, EventType.ERROR), "failed"),
            ((EventType.STARTED, EventType.COMPLETED), "done"),
        ],
    )
    async def test_the_analyzer_thread_s_real_state_with_a_link(
        self, site: Site, events: tuple[EventType, ...], state: str
    ) -> None:
        await site.enable(reviewer=True)
        thread_id = analyzer_thread("github.com", "acme/widgets")
        await site.thread(thread_id, kind=Role.ANALYZER)
        for type in events:
            await site.emit(thread_id, type)
        admin = await site.sign_in("root", admin=True)
        body = (await admin.get("/api/v1/review-styles/acme/widgets")).json()
        assert body["analyzer"] == {"thread_id": thread_id, "state": state, "url": f"/threads/{thread_id}"}
        [summary] = (await admin.get("/api/v1/review-styles")).json()
        assert summary["analyzer"]["state"] == state
        page = (await admin.get("/review-styles/acme/widgets")).text
        link = f'<a href="/threads/{thread_id}"><span class="state state-{state}">{state}</span>'
        assert link in page
        assert ("Its last run failed" in page) == (state == "failed")
        assert (
            f'<a href="/threads/{thread_id}"><span class="state state-{state}">'
            in (await admin.get("/review-styles")).text
        )
