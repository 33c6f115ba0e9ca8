"""``/api/v1/team``: everyone reads the team defaults; administrators replace them, with the
models per role checked against the catalog."""

from __future__ import annotations

from drydock.accounts import RoleModel
from tests.dashboard.conftest import Site

TEAM = {
    "default_repository": "acme/widgets",
    "allowed_organizations": ["acme", "Acme-Labs"],
    "mention_handle": "@dock",
    "models": {"coder": {"model": "gpt-5.1", "effort": "high"}, "reviewer": {"model": "gpt-5-mini", "effort": None}},
}


class TestTeam:
    async def test_an_administrator_replaces_the_defaults(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        answer = await admin.send("PUT", "/api/v1/team", TEAM)
        assert answer.status_code == 200, answer.text
        assert answer.json()["allowed_organizations"] == ["acme", "acme-labs"]
        stored = await site.accounts.team()
        assert stored.models == {
            "coder": RoleModel(model="gpt-5.1", effort="high"),
            "reviewer": RoleModel(model="gpt-5-mini"),
        }
        assert stored.mention_handle == "@dock"

    async def test_everyone_reads_them(self, site: Site) -> None:
        admin, ada = await site.sign_in("root", admin=True), await site.sign_in("ada")
        await admin.send("PUT", "/api/v1/team", TEAM)
        answer = await ada.get("/api/v1/team")
        assert answer.status_code == 200
        assert answer.json()["models"]["coder"] == {"model": "gpt-5.1", "effort": "high"}

    async def test_others_may_not_change_them(self, site: Site) -> None:
        ada = await site.sign_in("ada")
        answer = await ada.send("PUT", "/api/v1/team", TEAM)
        assert answer.status_code == 403
        assert (await site.accounts.team()).mention_handle is None

    async def test_wrong_values_name_their_fields(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        answer = await admin.send(
            "PUT",
            "/api/v1/team",
            {
                "allowed_organizations": ["not an org"],
                "mention_handle": "dock",
                "models": {"coder": {"model": "gpt-9"}, "analyzer": {"model": "gpt-4.1", "effort": "low"}},
            },
        )
        assert answer.status_code == 422
        locations = {tuple(error["loc"]) for error in answer.json()["detail"]}
        assert ("body", "models", "coder", "model") in locations
        assert ("body", "models", "analyzer", "effort") in locations
        assert ("body", "allowed_organizations") in locations
        assert ("body", "mention_handle") in locations

    async def test_an_unknown_role_is_refused(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)
        answer = await admin.send("PUT", "/api/v1/team", {"models": {"janitor": {"model": "gpt-5"}}})
        assert answer.status_code == 422
