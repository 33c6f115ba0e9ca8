"""The web UI: every page renders for whoever may see it, with landmarks and security headers;
forms post with their CSRF token and redirect, or re-render with the field errors."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from drydock.accounts import LinkCodes, Outcome, Provider
from drydock.bus import EventType
from drydock.review.guidelines import Guideline, GuidelinesStore, Provenance
from drydock.threads.states import ThreadState, ThreadStates
from drydock.usage.calls import CallUsage
from drydock.usage.ledger import UsageLedger, UsageScope
from tests.dashboard.conftest import Site


def csrf_fields(html: str) -> set[str]:
    return set(re.findall(r'name="csrf_token" value="([^"]*)"', html))


class TestRendering:
    @pytest.mark.parametrize(
        "path", ["/threads", "/threads/new", "/profile", "/team", "/repositories", "/review-styles"]
    )
    async def test_pages_render_with_landmarks_and_headers(self, site: Site, path: str) -> None:
        await site.enable()
        admin = await site.sign_in("root", admin=True)
        page = await admin.get(path)
        assert page.status_code == 200, page.text
        assert '<main id="main"' in page.text
        assert '<nav aria-label="Main">' in page.text
        assert 'aria-current="page"' in page.text
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-frame-options"] == "DENY"
        assert csrf_fields(page.text) == {admin.csrf}

    async def test_the_root_goes_to_the_threads(self, site: Site) -> None:
        answer = await site.client().get("/")
        assert (answer.status_code, answer.headers["location"]) == (303, "/threads")

    async def test_administrator_pages_are_403_for_others(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        page = await ada.get("/dead-letters")
        assert page.status_code == 403
        assert "Not allowed" in page.text
        assert (await ada.form("/repositories", {"full_name": "acme/widgets"})).status_code == 403
        assert "<fieldset disabled>" in (await ada.get("/team")).text
        assert (await ada.form("/team", {"mention_handle": "@x"})).status_code == 403

    async def test_static_files(self, site: Site) -> None:
        client = site.client()
        script = await client.get("/static/dashboard.js")
        assert script.status_code == 200
        assert script.headers["content-type"].startswith("text/javascript")
        assert (await client.get("/static/dashboard.css")).status_code == 200
        assert (await client.get("/static/thread.css")).status_code == 200
        assert (await client.get("/static/missing.js")).status_code == 404
        assert (await client.get("/static/..%2Fendpoints.py")).status_code == 404


class TestThreadPages:
    async def test_starting_a_thread_from_the_form(self, site: Site) -> None:
        await site.enable()
        ada = await site.sign_in("ada")
        form = await ada.get("/threads/new")
        assert '<option value="acme/widgets"' in form.text
        answer = await ada.form("/threads/new", {"repository": "acme/widgets", "prompt": "Fix add()", "model": ""})
        assert answer.status_code == 303
        thread_id = answer.headers["location"].removeprefix("/threads/")
        assert (await site.metadata.get(thread_id)).title == "Fix add()"

    async def test_a_wrong_model_re_renders_the_form_with_the_error(self, site: Site) -> None:
        await site.enable()
        ada = await site.sign_in("ada")
        answer = await ada.form(
            "/threads/new", {"repository": "acme/widgets", "prompt": "Fix it", "model": "gpt-4.1", "effort": "high"}
        )
        assert answer.status_code == 422
        assert 'aria-invalid="true" aria-describedby="effort-error"' in answer.text
        assert "takes no reasoning effort" in answer.text
        assert ">Fix it</textarea>" in answer.text

    async def test_the_thread_page_its_follow_up_and_stop(self, site: Site) -> None:
        thread_id = await site.thread(str(uuid.uuid4()), owner="dev-ada")
        await site.emit(thread_id, EventType.STARTED, model="gpt-5.1")
        await site.emit(thread_id, EventType.MODEL_CALL, text="Looking <b>now</b>", tool_calls=["execute"])
        ada = await site.sign_in("ada")
        page = await ada.get(f"/threads/{thread_id}")
        assert page.status_code == 200
        assert "<p>Looking &lt;b&gt;now&lt;/b&gt;</p>" in page.text
        assert 'data-thread-live="/threads/' in page.text
        assert '<p id="working" class="working" role="status">Running execute…</p>' in page.text
        assert 'id="stop-form" method="post" action="/threads/' in page.text
        assert f'action="/threads/{thread_id}/stop" hidden' not in page.text
        sent = await ada.form(f"/threads/{thread_id}/messages", {"text": "Also sub()"})
        assert (sent.status_code, sent.headers["location"]) == (303, f"/threads/{thread_id}?notice=Message%20sent.")
        await site.emit(thread_id, EventType.COMPLETED, summary="")
        await ThreadStates(site.runtime.redis, site.runtime.keys).set(thread_id, ThreadState.QUEUED)
        queued = (await ada.get(f"/threads/{thread_id}")).text
        assert '<p id="working" class="working" role="status">Waiting for the agent to start…</p>' in queued
        stopped = await ada.form(f"/threads/{thread_id}/stop", {})
        assert stopped.status_code == 303
        assert "A stop is requested." in (await ada.get(f"/threads/{thread_id}")).text

    async def test_a_runs_tokens_time_and_cost_and_an_unknown_cost_as_unknown(self, site: Site) -> None:
        thread_id = await site.thread(str(uuid.uuid4()), owner="dev-ada")
        usage = {"input_tokens": 2000, "cached_input_tokens": 1200, "output_tokens": 300, "reasoning_tokens": 120}
        for run_id, costs in (("priced", [0.004, 0.001]), ("unpriced", [0.004, None])):
            await site.emit(thread_id, EventType.STARTED, run_id=run_id, model="gpt-5.1")
            for cost in costs:
                await site.emit(thread_id, EventType.MODEL_CALL, run_id=run_id, text="", tool_calls=[], **usage,
                                cost_usd=cost, seconds=1.25)  # fmt: skip
            await site.emit(thread_id, EventType.COMPLETED, run_id=run_id, summary="done")
        ada = await site.sign_in("ada")
        page = (await ada.get(f"/threads/{thread_id}")).text
        lines = [" ".join(line.split()) for line in re.findall(r'<p class="run-usage">(.*?)</p>', page, re.S)]
        assert len(lines) == 2
        tags = re.compile(r"</?span>")
        priced, unpriced = (tags.sub("", line) for line in lines)
        assert priced.startswith("2 model calls 4,000 tokens in (2,400 cached) 600 out (240 reasoning) cost $0.0050 ")
        assert "(2.5 s in the model)" in priced
        assert "cost unknown" in unpriced
        assert "$0.0000" not in page

    async def test_a_runs_usage_is_the_ledgers_when_it_has_the_run(self, site: Site) -> None:
        thread_id = await site.thread(str(uuid.uuid4()), owner="dev-ada")
        ledger = UsageLedger(site.runtime.redis, site.runtime.keys)
        scope = UsageScope(run_id="run-1", thread_id=thread_id, role="coder")
        for _ in range(3):  # the run's subagent calls too, which have no events of their own
            await ledger.add(scope, CallUsage("gpt-5.1", 1000, 0, 100, 0, 0.002))
        await site.emit(thread_id, EventType.STARTED, model="gpt-5.1")
        await site.emit(thread_id, EventType.MODEL_CALL, text="", tool_calls=[], input_tokens=1000, output_tokens=100,
                        cost_usd=0.002, seconds=0.5)  # fmt: skip
        await site.emit(thread_id, EventType.COMPLETED, summary="done")
        page = (await (await site.sign_in("ada")).get(f"/threads/{thread_id}")).text
        [line] = re.findall(r'<p class="run-usage">(.*?)</p>', page, re.S)
        assert re.sub(r"</?span>", "", " ".join(line.split())).startswith(
            "3 model calls 3,000 tokens in 300 out cost $0.0060 "
        )

    async def test_a_conversation_with_a_follow_up_and_its_run(self, site: Site) -> None:
        await site.enable()
        ada = await site.sign_in("ada")
        created = await ada.form("/threads/new", {"repository": "acme/widgets", "prompt": "Fix **add()**"})
        thread_id = created.headers["location"].removeprefix("/threads/")
        await site.emit(thread_id, EventType.STARTED, run_id="first", model="gpt-5.1")
        await site.emit(thread_id, EventType.MODEL_CALL, run_id="first", text="", tool_calls=["execute"],
                        arguments=[json.dumps({"command": "pytest -q"})])  # fmt: skip
        await site.emit(thread_id, EventType.TOOL_CALL, run_id="first", name="execute", status="success",
                        arguments=json.dumps({"command": "pytest -q"}), exit_code=1,
                        output="1 failed\n[Command failed with exit code 1]")  # fmt: skip
        await site.emit(thread_id, EventType.COMPLETED, run_id="first", summary="Tests *fail*.")
        await ada.form(f"/threads/{thread_id}/messages", {"text": "Then fix `sub()` too"})
        await site.emit(thread_id, EventType.STARTED, run_id="second", model="gpt-5.1")
        await site.emit(thread_id, EventType.COMPLETED, run_id="second", summary="Fixed.")
        page = (await ada.get(f"/threads/{thread_id}")).text
        timeline = page[page.index('id="timeline"') : page.index('id="working"')]
        order = [timeline.index(marker) for marker in ("<strong>add()</strong>", 'id="run-first"',
                 "<code>sub()</code>", 'id="run-second"')]  # fmt: skip
        assert order == sorted(order)
        assert re.search(r'id="run-second".*started by <a href="#message-\d+">the message from ada</a>', timeline, re.S)
        assert '<code class="command">$ pytest -q</code>' in timeline
        assert '<span class="exit exit-bad">exit code 1</span>' in timeline
        assert "<p>Tests <em>fail</em>.</p>" in timeline
        assert 'id="working" class="working" role="status" hidden' in page
        sections = (await ada.get(f"/threads/{thread_id}/sections")).json()
        assert set(sections) == {"timeline", "changes", "files", "pulls", "state", "last_seq"}
        assert sections["last_seq"] == max(int(seq) for seq in re.findall(r'data-seq="(\d+)"', page))
        assert 'id="run-second"' in sections["timeline"]
        assert sections["state"] == "idle"
        assert (await ada.get(f"/threads/{uuid.uuid4()}/sections")).status_code == 404
        assert (await site.client().get(f"/threads/{thread_id}/sections")).status_code == 303

    async def test_the_list_filters_and_pages(self, site: Site) -> None:
        for second in range(3):
            await site.thread(str(uuid.uuid4()), owner="dev-ada", created_at=f"2026-01-01T00:00:0{second}+00:00")
        ada = await site.sign_in("ada")
        page = await ada.get("/threads?mine=1")
        assert page.text.count('<td data-label="Thread"><a href="/threads/') == 3
        assert "No threads match these filters." in (await ada.get("/threads?mine=1&state=failed")).text

    async def test_an_unknown_thread_is_a_404_page(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        page = await ada.get(f"/threads/{uuid.uuid4()}")
        assert page.status_code == 404
        assert "text/html" in page.headers["content-type"]


class TestSettingsPages:
    async def test_saving_the_profile(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.form("/profile", {"model": "gpt-5", "effort": "low", "draft_prs": "1", "branch_prefix": ""})
        assert (answer.status_code, answer.headers["location"]) == (303, "/profile?notice=Profile%20saved.")
        profile = await site.accounts.profile("dev-ada")
        assert (profile.model, profile.effort, profile.draft_prs, profile.auto_open_pr) == ("gpt-5", "low", True, False)

    async def test_a_profile_error_is_shown_next_to_its_field(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.form("/profile", {"default_repository": "nope"})
        assert answer.status_code == 422
        assert 'id="default_repository-error"' in answer.text

    async def test_linking_an_account_shows_a_code_then_the_pending_and_verified_links(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.form("/profile/link-codes", {"provider": "slack"})
        assert answer.status_code == 201
        code = re.search(r'<code class="link-code">([A-Z0-9-]+)</code>', answer.text)
        assert code is not None
        assert f"@drydock link {code.group(1)}" in answer.text
        page = (await ada.get("/profile")).text
        assert "slack: code valid until" in page
        assert code.group(1) not in page
        codes = LinkCodes(site.runtime.redis, site.runtime.keys, site.accounts)
        assert (await codes.redeem(Provider.SLACK, "U0ADA", code.group(1))).outcome is Outcome.LINKED
        page = (await ada.get("/profile")).text
        assert "<code>U0ADA</code>" in page
        assert "slack: code valid until" not in page
        removed = await ada.form("/profile/identities/remove", {"provider": "slack", "external_id": "U0ADA"})
        assert removed.status_code == 303
        assert "<code>U0ADA</code>" not in (await ada.get("/profile")).text

    async def test_a_pending_link_can_be_withdrawn(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        await ada.form("/profile/link-codes", {"provider": "linear"})
        assert (await ada.form("/profile/link-codes/cancel", {"provider": "linear"})).status_code == 303
        assert "linear: code valid until" not in (await ada.get("/profile")).text

    async def test_a_code_for_github_is_refused_with_a_page(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.form("/profile/link-codes", {"provider": "github"})
        assert answer.status_code == 422
        assert "choose slack or linear" in answer.text

    async def test_an_account_id_typed_in_links_nothing(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.form("/profile/identities", {"provider": "slack", "external_id": "U0ADA"})
        assert answer.status_code in {404, 405}
        assert await site.accounts.user_for(Provider.SLACK, "U0ADA") is None

    async def test_saving_the_team_defaults(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        answer = await admin.form(
            "/team", {"allowed_organizations": "acme, globex", "coder_model": "gpt-5", "coder_effort": "high"}
        )
        assert answer.status_code == 303
        team = await site.accounts.team()
        assert team.allowed_organizations == ("acme", "globex")
        assert team.models["coder"].model == "gpt-5"

    async def test_toggling_a_repository(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        answer = await admin.form("/repositories/acme/widgets", {"enabled": "1", "coder": "1", "reviewer": "1"})
        assert answer.status_code == 303
        stored = await site.accounts.repository("acme/widgets")
        assert stored is not None
        assert (stored.reviewer, stored.autofix) == (True, False)
        assert (await admin.form("/repositories/acme/widgets", {})).status_code == 303
        assert await site.accounts.repository("acme/widgets") is None

    async def test_review_style_forms(self, site: Site) -> None:
        await site.enable()
        store = GuidelinesStore(site.runtime.redis, site.runtime.keys, host="github.com")
        version = await store.save("acme/widgets", [Guideline(text="Keep it short.")], Provenance(mode="bootstrap"))
        admin = await site.sign_in("root", admin=True)
        page = await admin.get("/review-styles/acme/widgets")
        assert "Keep it short." in page.text
        assert (await admin.form(f"/review-styles/acme/widgets/versions/{version}/approve", {})).status_code == 303
        edited = await admin.form(
            "/review-styles/acme/widgets/versions", {"rules": "[style] Use f-strings.\n\nNo globals.", "based_on": "1"}
        )
        assert edited.status_code == 303
        current = await store.current("acme/widgets")
        assert current is not None
        assert [(rule.category, rule.text) for rule in current.rules] == [
            ("style", "Use f-strings."),
            (None, "No globals."),
        ]
