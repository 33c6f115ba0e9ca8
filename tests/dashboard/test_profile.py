"""``/api/v1/profile``: a person reads and replaces their own profile, with the model and effort
checked against the catalog, and links Slack and Linear accounts only with a code sent from them."""

from __future__ import annotations

from drydock.accounts import LinkCodes, Outcome, Provider, TeamDefaults
from tests.dashboard.conftest import Site

FULL = {
    "default_repository": "acme/widgets",
    "model": "gpt-5",
    "effort": "high",
    "branch_prefix": "ada/",
    "draft_prs": True,
    "auto_open_pr": False,
    "autofix": True,
    "plan_approval": True,
}


class TestProfile:
    async def test_a_new_person_has_the_defaults(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.get("/api/v1/profile")
        assert answer.json() == {
            "user_id": "dev-ada", "default_repository": None, "model": None, "effort": None, "branch_prefix": None,
            "draft_prs": False, "auto_open_pr": True, "autofix": False, "plan_approval": False,
            "identities": [], "pending": [],
        }  # fmt: skip

    async def test_a_saved_profile_is_what_the_workers_read(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.send("PUT", "/api/v1/profile", FULL)
        assert answer.status_code == 200, answer.text
        assert answer.json() | {"identities": []} == FULL | {"user_id": "dev-ada", "identities": [], "pending": []}
        stored = await site.accounts.profile("dev-ada")
        assert (stored.model, stored.effort, stored.branch_prefix, stored.autofix) == ("gpt-5", "high", "ada/", True)
        assert stored.plan_approval is True

    async def test_empty_text_means_unset(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        await ada.send("PUT", "/api/v1/profile", FULL)
        answer = await ada.send("PUT", "/api/v1/profile", {"model": "", "effort": " ", "default_repository": ""})
        assert (answer.json()["model"], answer.json()["effort"], answer.json()["default_repository"]) == (
            None,
            None,
            None,
        )

    async def test_people_only_change_their_own(self, site: Site) -> None:
        ada, bob = await site.sign_in("ada"), await site.sign_in("bob")
        await ada.send("PUT", "/api/v1/profile", FULL)
        assert (await bob.get("/api/v1/profile")).json()["model"] is None


class TestValidation:
    async def test_an_unknown_model_and_a_bad_effort_name_their_fields(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.send("PUT", "/api/v1/profile", {"model": "gpt-9", "effort": "maximal"})
        assert answer.status_code == 422
        errors = {tuple(error["loc"]): error["msg"] for error in answer.json()["detail"]}
        assert set(errors) == {("body", "model"), ("body", "effort")}
        assert "unknown model 'gpt-9'" in errors[("body", "model")]
        assert "'maximal' is not a reasoning effort" in errors[("body", "effort")]

    async def test_an_effort_the_model_does_not_take(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.send("PUT", "/api/v1/profile", {"model": "gpt-4.1", "effort": "high"})
        assert answer.status_code == 422
        assert answer.json()["detail"][0]["loc"] == ["body", "effort"]

    async def test_a_bad_repository_and_branch_prefix(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.send("PUT", "/api/v1/profile", {"default_repository": "nope", "branch_prefix": "../x"})
        assert answer.status_code == 422
        assert {error["loc"][-1] for error in answer.json()["detail"]} == {"default_repository", "branch_prefix"}

    async def test_unknown_fields_are_refused(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.send("PUT", "/api/v1/profile", {"admin": True})
        assert answer.status_code == 422
        assert answer.json()["detail"][0]["loc"] == ["body", "admin"]

    async def test_nothing_is_saved_when_a_field_is_wrong(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        await ada.send("PUT", "/api/v1/profile", {"model": "gpt-9", "autofix": True})
        assert (await site.accounts.profile("dev-ada")).autofix is False


def codes(site: Site) -> LinkCodes:
    return LinkCodes(site.runtime.redis, site.runtime.keys, site.accounts)


class TestIdentities:
    async def test_a_code_links_the_account_that_sends_it(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.send("POST", "/api/v1/profile/link-codes", {"provider": "slack"})
        assert answer.status_code == 201, answer.text
        issued = answer.json()
        assert f"@drydock link {issued['code']}" in issued["instructions"]
        profile = (await ada.get("/api/v1/profile")).json()
        assert [link["provider"] for link in profile["pending"]] == ["slack"]
        assert profile["identities"] == []
        assert (await codes(site).redeem(Provider.SLACK, "U0ADA", issued["code"])).outcome is Outcome.LINKED
        profile = (await ada.get("/api/v1/profile")).json()
        assert profile["identities"] == [{"provider": "slack", "external_id": "U0ADA"}]
        assert profile["pending"] == []
        answer = await ada.send("DELETE", "/api/v1/profile/identities/slack/U0ADA")
        assert answer.status_code == 204
        assert await site.accounts.user_for(Provider.SLACK, "U0ADA") is None

    async def test_the_instructions_use_the_teams_handle(self, site: Site) -> None:
        await site.accounts.save_team(TeamDefaults(mention_handle="@helper"))
        ada = await site.sign_in("ada")
        answer = await ada.send("POST", "/api/v1/profile/link-codes", {"provider": "linear"})
        assert "comment on any issue: @helper link " in answer.json()["instructions"]

    async def test_a_pending_link_is_withdrawn(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        issued = (await ada.send("POST", "/api/v1/profile/link-codes", {"provider": "linear"})).json()
        assert (await ada.send("DELETE", "/api/v1/profile/link-codes/linear")).status_code == 204
        assert (await ada.send("DELETE", "/api/v1/profile/link-codes/linear")).status_code == 404
        assert (await codes(site).redeem(Provider.LINEAR, "lin-1", issued["code"])).outcome is Outcome.INVALID

    async def test_an_account_id_cannot_be_claimed(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.send("POST", "/api/v1/profile/identities", {"provider": "slack", "external_id": "U0ADA"})
        assert answer.status_code in {404, 405}
        assert await site.accounts.user_for(Provider.SLACK, "U0ADA") is None

    async def test_unlinking_someone_else_s_account_is_404(self, site: Site) -> None:
        await site.accounts.link(Provider.SLACK, "U0ADA", "dev-ada")
        bob = await site.sign_in("bob")
        assert (await bob.send("DELETE", "/api/v1/profile/identities/slack/U0ADA")).status_code == 404
        assert await site.accounts.user_for(Provider.SLACK, "U0ADA") == "dev-ada"

    async def test_github_is_not_linked_with_a_code(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.send("POST", "/api/v1/profile/link-codes", {"provider": "github"})
        assert answer.status_code == 422
        assert (await ada.send("DELETE", "/api/v1/profile/identities/github/1")).status_code == 422
        assert (await ada.send("DELETE", "/api/v1/profile/link-codes/github")).status_code == 404
