"""``/api/v1/repositories``: administrators see the repositories the GitHub App is installed on
(read from GitHub as the App) and choose which agents work on each."""

from __future__ import annotations

import re

import pytest

from drydock.accounts import RepositorySettings
from tests.dashboard.conftest import Site, SiteFactory
from tests.fakes.github import FakeGithub


@pytest.fixture
async def installed(site_factory: SiteFactory, github: FakeGithub) -> Site:
    app = github.create_app("drydock")
    github.install(app, "acme", ["widgets", "gadgets"])
    github.install(app, "globex", None)
    github.state.repository("globex/tools")
    return await site_factory(github={"api_url": github.base_url, "app_id": app.id, "private_key": app.private_key_pem})


class TestListing:
    async def test_the_app_s_repositories_with_their_agents(self, installed: Site) -> None:
        await installed.enable("acme/widgets", reviewer=True)
        admin = await installed.sign_in("root", admin=True)
        answer = await admin.get("/api/v1/repositories")
        assert answer.status_code == 200
        body = answer.json()
        assert body["installations"] == "ok"
        rows = {row["full_name"]: row for row in body["repositories"]}
        assert list(rows) == ["acme/gadgets", "acme/widgets", "globex/tools"]
        assert rows["acme/widgets"] | {"private": None} == {
            "full_name": "acme/widgets", "installed": True, "private": None, "enabled": True, "coder": True,
            "reviewer": True, "autofix": False, "plan_approval": False, "protected_paths": [".github/workflows/**"],
            "budgets": {"run_usd": None, "run_model_calls": None, "repository_day_usd": None},
        }  # fmt: skip
        assert rows["acme/gadgets"]["enabled"] is False

    async def test_an_enabled_repository_the_app_left_is_marked(self, installed: Site) -> None:
        await installed.accounts.save_repository(RepositorySettings(full_name="acme/old"))
        admin = await installed.sign_in("root", admin=True)
        rows = {row["full_name"]: row for row in (await admin.get("/api/v1/repositories")).json()["repositories"]}
        assert rows["acme/old"]["installed"] is False

    async def test_without_a_github_app_only_enabled_ones_are_listed(self, site: Site) -> None:
        await site.enable("acme/widgets")
        admin = await site.sign_in("root", admin=True)
        body = (await admin.get("/api/v1/repositories")).json()
        assert body["installations"] == "not configured"
        assert [row["full_name"] for row in body["repositories"]] == ["acme/widgets"]
        assert body["repositories"][0]["installed"] is None

    async def test_it_is_for_administrators(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        assert (await ada.get("/api/v1/repositories")).status_code == 403


class TestToggles:
    async def test_enabling_and_changing_a_repository(self, installed: Site) -> None:
        admin = await installed.sign_in("root", admin=True)
        answer = await admin.send("PUT", "/api/v1/repositories/ACME/gadgets", {"coder": True, "reviewer": True})
        assert answer.status_code == 200, answer.text
        assert answer.json()["full_name"] == "acme/gadgets"
        stored = await installed.accounts.repository("acme/gadgets")
        assert stored == RepositorySettings(full_name="acme/gadgets", coder=True, reviewer=True, autofix=False)
        await admin.send("PUT", "/api/v1/repositories/acme/gadgets", {"coder": False, "autofix": True})
        stored = await installed.accounts.repository("acme/gadgets")
        assert stored is not None
        assert (stored.coder, stored.reviewer, stored.autofix) == (False, False, True)

    async def test_plan_approval_and_protected_paths(self, installed: Site) -> None:
        admin = await installed.sign_in("root", admin=True)
        change = {"coder": True, "plan_approval": True, "protected_paths": ["deploy/**", ".github/**"]}
        answer = await admin.send("PUT", "/api/v1/repositories/acme/gadgets", change)
        assert answer.status_code == 200, answer.text
        assert (answer.json()["plan_approval"], answer.json()["protected_paths"]) == (True, ["deploy/**", ".github/**"])
        stored = await installed.accounts.repository("acme/gadgets")
        assert stored is not None
        assert (stored.plan_approval, stored.protected_paths) == (True, ("deploy/**", ".github/**"))
        await admin.send("PUT", "/api/v1/repositories/acme/gadgets", {"coder": True})
        stored = await installed.accounts.repository("acme/gadgets")
        assert stored is not None
        assert (stored.plan_approval, stored.protected_paths) == (False, (".github/workflows/**",))

    async def test_a_bad_protected_path_is_422_and_nothing_is_saved(self, installed: Site) -> None:
        admin = await installed.sign_in("root", admin=True)
        answer = await admin.send("PUT", "/api/v1/repositories/acme/gadgets", {"protected_paths": ["x" * 201]})
        assert answer.status_code == 422
        assert "not a usable path pattern" in answer.text
        assert await installed.accounts.repository("acme/gadgets") is None

    async def test_a_repository_the_app_is_not_installed_on_is_422(self, installed: Site) -> None:
        admin = await installed.sign_in("root", admin=True)
        answer = await admin.send("PUT", "/api/v1/repositories/acme/secret", {"coder": True})
        assert answer.status_code == 422
        assert "not installed on acme/secret" in answer.json()["detail"][0]["msg"]

    async def test_a_new_installation_is_seen_at_once(self, installed: Site, github: FakeGithub) -> None:
        admin = await installed.sign_in("root", admin=True)
        await admin.get("/api/v1/repositories")
        github.install(github.state.apps[next(iter(github.state.apps))], "initech", ["tps"])
        answer = await admin.send("PUT", "/api/v1/repositories/initech/tps", {"coder": True})
        assert answer.status_code == 200, answer.text

    async def test_disabling(self, site: Site) -> None:
        await site.enable("acme/widgets")
        admin = await site.sign_in("root", admin=True)
        assert (await admin.send("DELETE", "/api/v1/repositories/acme/widgets")).status_code == 204
        assert await site.accounts.repository("acme/widgets") is None
        assert (await admin.send("DELETE", "/api/v1/repositories/acme/widgets")).status_code == 404

    async def test_a_bad_name_is_422(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        assert (await admin.send("PUT", "/api/v1/repositories/ac%20me/x", {"coder": True})).status_code == 422

    async def test_others_may_not_change_them(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        assert (await ada.send("PUT", "/api/v1/repositories/acme/widgets", {"coder": True})).status_code == 403
        assert (await ada.send("DELETE", "/api/v1/repositories/acme/widgets")).status_code == 403
        assert await site.accounts.repository("acme/widgets") is None

    async def test_github_down_is_503(self, site_factory: SiteFactory, github: FakeGithub) -> None:
        app = github.create_app("drydock")
        site = await site_factory(
            github={"api_url": "http://127.0.0.1:9/api", "app_id": app.id, "private_key": app.private_key_pem}
        )
        admin = await site.sign_in("root", admin=True)
        assert (await admin.send("PUT", "/api/v1/repositories/acme/widgets", {"coder": True})).status_code == 503
        listing = (await admin.get("/api/v1/repositories")).json()
        assert listing["installations"].startswith("GitHub cannot be reached")


class TestByName:
    async def test_enabling_a_repository_by_name_without_a_github_app(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        answer = await admin.send("POST", "/api/v1/repositories", {"full_name": " acme/widgets ", "reviewer": True})
        assert answer.status_code == 201, answer.text
        assert answer.json() | {"private": None} == {
            "full_name": "acme/widgets", "installed": None, "private": None, "enabled": True, "coder": True,
            "reviewer": True, "autofix": False, "plan_approval": False, "protected_paths": [".github/workflows/**"],
            "budgets": {"run_usd": None, "run_model_calls": None, "repository_day_usd": None},
        }  # fmt: skip
        assert await site.accounts.repository("acme/widgets") == RepositorySettings(
            full_name="acme/widgets", coder=True, reviewer=True, autofix=False
        )

    @pytest.mark.parametrize("name", ["widgets", "acme/widgets/extra", "acme/../x", "ac me/x", "", "/"])
    async def test_a_name_not_of_the_form_owner_name_is_422_naming_the_field(self, site: Site, name: str) -> None:
        admin = await site.sign_in("root", admin=True)
        answer = await admin.send("POST", "/api/v1/repositories", {"full_name": name})
        assert answer.status_code == 422
        [error] = answer.json()["detail"]
        assert error["loc"] == ["body", "full_name"]
        assert "owner/name" in error["msg"]
        assert await site.accounts.repositories() == []

    async def test_with_a_github_app_it_must_be_installed_there(self, installed: Site) -> None:
        admin = await installed.sign_in("root", admin=True)
        refused = await admin.send("POST", "/api/v1/repositories", {"full_name": "acme/secret"})
        assert refused.status_code == 422
        assert refused.json()["detail"][0]["loc"] == ["body", "full_name"]
        accepted = await admin.send("POST", "/api/v1/repositories", {"full_name": "acme/widgets"})
        assert (accepted.status_code, accepted.json()["installed"]) == (201, True)

    async def test_the_page_s_form_enables_it(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        page = (await admin.get("/repositories")).text
        assert 'name="full_name"' in page
        answer = await admin.form("/repositories", {"full_name": "acme/widgets", "coder": "1", "autofix": "1"})
        assert (answer.status_code, answer.headers["location"]) == (303, "/repositories?notice=acme/widgets%20enabled.")
        stored = await site.accounts.repository("acme/widgets")
        assert stored is not None
        assert (stored.coder, stored.reviewer, stored.autofix) == (True, False, True)
        assert '<th scope="row" id="repo-acme-widgets">acme/widgets' in (await admin.get("/repositories")).text

    async def test_a_bad_name_in_the_form_is_shown_again_marked_with_its_message(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        answer = await admin.form("/repositories", {"full_name": "acme widgets", "reviewer": "1"})
        assert answer.status_code == 422
        assert 'value="acme widgets"' in answer.text
        assert 'aria-invalid="true" aria-describedby="full_name-error"' in answer.text
        assert re.search(r'id="full_name-error">[^<]*not a repository name of the form owner/name', answer.text)
        assert re.search(r'name="reviewer" value="1" checked', answer.text)
        assert not re.search(r'name="coder" value="1" checked', answer.text)
        assert await site.accounts.repositories() == []

    async def test_others_are_told_who_enables_repositories_and_where(self, site_factory: SiteFactory) -> None:
        site = await site_factory(dashboard={"admin_logins": ["root", "grace"]})
        ada = await site.sign_in("ada")
        page = await ada.get("/repositories")
        assert page.status_code == 200
        assert "<strong>root</strong>, <strong>grace</strong>" in page.text
        assert 'name="full_name"' not in page.text
        assert 'enables repositories on the <a href="/repositories">' in (await ada.get("/threads/new")).text
        refused = await ada.send("POST", "/api/v1/repositories", {"full_name": "acme/widgets"})
        assert refused.status_code == 403
