"""The web UI: every page renders for whoever may see it, with landmarks and security headers;
forms post with their CSRF token and redirect, or re-render with the field errors."""

from __future__ import annotations

import re
import uuid

import pytest

from drydock.accounts import LinkCodes, Outcome, Provider
from drydock.bus import EventType
from drydock.review.guidelines import Guideline, GuidelinesStore, Provenance
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
        assert (await site.metadata.get(thread_id))["title"] == "Fix add()"

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
        assert "Looking &lt;b&gt;now&lt;/b&gt;" in page.text
        assert 'data-live="/threads/' in page.text
        assert 'id="stop-form" method="post" action="/threads/' in page.text
        assert f'action="/threads/{thread_id}/stop" hidden' not in page.text
        sent = await ada.form(f"/threads/{thread_id}/messages", {"text": "Also sub()"})
        assert (sent.status_code, sent.headers["location"]) == (303, f"/threads/{thread_id}?notice=Message%20sent.")
        stopped = await ada.form(f"/threads/{thread_id}/stop", {})
        assert stopped.status_code == 303
        assert "A stop is requested." in (await ada.get(f"/threads/{thread_id}")).text

    async def test_a_model_calls_tokens_and_cost_are_shown_and_an_unknown_cost_as_unknown(self, site: Site) -> None:
        thread_id = await site.thread(str(uuid.uuid4()), owner="dev-ada")
        usage = {"input_tokens": 2000, "cached_input_tokens": 1200, "output_tokens": 300, "reasoning_tokens": 120}
        await site.emit(thread_id, EventType.MODEL_CALL, text="priced", tool_calls=[], **usage, cost_usd=0.00415)
        await site.emit(thread_id, EventType.MODEL_CALL, text="unpriced", tool_calls=[], **usage, cost_usd=None)
        ada = await site.sign_in("ada")
        page = (await ada.get(f"/threads/{thread_id}")).text
        assert "2000 tokens in (1200 cached), 300 out (120 reasoning), $0.0042" in page
        assert "2000 tokens in (1200 cached), 300 out (120 reasoning), cost unknown" in page
        assert "$0.0000" not in page

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
