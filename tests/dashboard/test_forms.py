"""Forms that refuse a value show again with everything that was typed, the bad value marked
(``aria-invalid`` and its message next to it), and nothing saved."""

from __future__ import annotations

import re

from tests.dashboard.conftest import Site


def marked(html: str, field: str) -> bool:
    return bool(re.search(rf'id="{field}"[^>]*aria-invalid="true" aria-describedby="{field}-error"', html)) and (
        f'id="{field}-error"' in html
    )


class TestTeamForm:
    async def test_a_bad_value_keeps_the_rest_and_is_marked(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        answer = await admin.form(
            "/team",
            {
                "allowed_organizations": "acme globex", "mention_handle": "@helper", "default_repository": "not a repo",
                "coder_model": "gpt-5", "coder_effort": "high", "reviewer_model": "no-such-model",
            },
        )  # fmt: skip
        assert answer.status_code == 422
        page = answer.text
        assert 'value="acme globex"' in page
        assert 'value="@helper"' in page
        assert 'value="not a repo"' in page
        assert '<option value="gpt-5" selected>' in page
        assert '<option value="high" selected>' in page
        assert '<option value="no-such-model" selected>' in page
        assert marked(page, "default_repository")
        assert marked(page, "reviewer_model")
        assert not marked(page, "coder_model")
        assert not marked(page, "allowed_organizations")
        assert (await site.accounts.team()).allowed_organizations == ()

    async def test_the_saved_values_are_shown_when_nothing_was_sent(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        assert (
            await admin.form("/team", {"allowed_organizations": "acme", "analyzer_effort": "low"})
        ).status_code == 303
        page = (await admin.get("/team")).text
        assert 'value="acme"' in page
        assert re.search(r'id="analyzer_effort"[^>]*>.*<option value="low" selected>', page, re.S)


class TestProfileForm:
    async def test_a_bad_value_keeps_the_rest_and_is_marked(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.form(
            "/profile",
            {"default_repository": "acme/widgets", "branch_prefix": "bad prefix!", "model": "gpt-5", "autofix": "1"},
        )
        assert answer.status_code == 422
        page = answer.text
        assert 'value="acme/widgets"' in page
        assert 'value="bad prefix!"' in page
        assert '<option value="gpt-5" selected>' in page
        assert re.search(r'name="autofix" value="1" checked', page)
        assert marked(page, "branch_prefix")
        assert not marked(page, "default_repository")
        assert (await site.accounts.profile("dev-ada")).default_repository is None


class TestNewThreadForm:
    async def test_a_bad_model_keeps_the_prompt_and_is_marked(self, site: Site) -> None:
        await site.enable()
        ada = await site.sign_in("ada")
        answer = await ada.form(
            "/threads/new", {"repository": "acme/widgets", "prompt": "Fix the bug in add()", "model": "nope"}
        )
        assert answer.status_code == 422
        assert "Fix the bug in add()</textarea>" in answer.text
        assert marked(answer.text, "model")
        assert '<option value="nope" selected>' in answer.text


class TestReviewStyleForm:
    async def test_rules_that_cannot_be_saved_are_shown_again_marked(self, site: Site) -> None:
        await site.enable(reviewer=True)
        admin = await site.sign_in("root", admin=True)
        answer = await admin.form("/review-styles/acme/widgets/versions", {"rules": "   \n  ", "based_on": "7"})
        assert answer.status_code == 422
        assert marked(answer.text, "rules")
        assert "write between 1 and 100 rules" in answer.text
        typed = "[style] Keep functions short.\n"
        answer = await admin.form("/review-styles/acme/widgets/versions", {"rules": typed, "based_on": "7"})
        assert answer.status_code == 422
        assert f"{typed}</textarea>" in answer.text
        assert marked(answer.text, "rules")


class TestDevelopmentLoginForm:
    async def test_a_bad_login_is_shown_again_marked(self, site: Site) -> None:
        client = site.client()
        page = await client.get("/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None
        answer = await client.post(
            "/auth/dev", data={"login": "ada lovelace", "admin": "true", "csrf_token": token.group(1)}
        )
        assert answer.status_code == 422
        assert 'value="ada lovelace"' in answer.text
        assert marked(answer.text, "login")
        assert re.search(r'name="admin" value="true" checked', answer.text)
        assert "drydock_session" not in answer.headers.get("set-cookie", "")
