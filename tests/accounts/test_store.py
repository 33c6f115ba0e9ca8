"""The accounts store on real Valkey: links, profiles, team defaults, enabled repositories, and
the shared membership cache."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from pydantic import ValidationError
from redis.asyncio import Redis

from drydock.accounts import (
    AccountsStore,
    AccountTaken,
    MembershipCache,
    Provider,
    RepositorySettings,
    RoleModel,
    TeamDefaults,
    UserIdentity,
    UserProfile,
)
from drydock.infra.redis import Keys


@pytest.fixture
def store(redis: Redis, keys: Keys) -> AccountsStore:
    return AccountsStore(redis, keys, host="github.com")


class TestLinks:
    async def test_link_find_and_unlink(self, store: AccountsStore) -> None:
        assert await store.user_for(Provider.SLACK, "U1") is None
        await store.link(Provider.SLACK, "U1", "ada")
        await store.link(Provider.GITHUB, "583231", "ada")
        assert await store.user_for(Provider.SLACK, "U1") == "ada"
        assert await store.accounts_of("ada") == [(Provider.GITHUB, "583231"), (Provider.SLACK, "U1")]
        assert await store.unlink(Provider.SLACK, "U1") is True
        assert await store.unlink(Provider.SLACK, "U1") is False
        assert await store.accounts_of("ada") == [(Provider.GITHUB, "583231")]

    async def test_relinking_an_account_moves_it(self, store: AccountsStore) -> None:
        await store.link(Provider.LINEAR, "lin-1", "ada")
        await store.link(Provider.LINEAR, "lin-1", "grace")
        assert await store.user_for(Provider.LINEAR, "lin-1") == "grace"
        assert await store.accounts_of("ada") == []
        assert await store.accounts_of("grace") == [(Provider.LINEAR, "lin-1")]

    async def test_invalid_ids_are_refused(self, store: AccountsStore) -> None:
        with pytest.raises(ValueError, match="external account id"):
            await store.link(Provider.SLACK, "U 1", "ada")
        with pytest.raises(ValueError, match="user id"):
            await store.link(Provider.SLACK, "U1", "")


class TestClaimedLinks:
    async def test_a_free_account_is_linked_and_a_taken_one_is_refused(self, store: AccountsStore) -> None:
        await store.link_if_free(Provider.SLACK, "U1", "ada")
        await store.link_if_free(Provider.SLACK, "U1", "ada")
        with pytest.raises(AccountTaken):
            await store.link_if_free(Provider.SLACK, "U1", "grace")
        assert await store.user_for(Provider.SLACK, "U1") == "ada"
        assert await store.accounts_of("grace") == []


class TestIdentities:
    async def test_identities_are_stored_and_read_in_batches(self, store: AccountsStore) -> None:
        ada = UserIdentity(user_id="gh-1", provider="github", login="ada", name="Ada Lovelace")
        await store.save_identity(ada)
        assert await store.identity("gh-1") == ada
        assert await store.identity("gh-2") is None
        assert await store.identities(["gh-1", "gh-2"]) == {"gh-1": ada}


class TestProfilesAndTeam:
    async def test_profile_round_trip(self, store: AccountsStore) -> None:
        assert await store.profile("ada") == UserProfile(user_id="ada")
        await store.save_profile(UserProfile(user_id="ada", default_repository="acme/api"))
        assert (await store.profile("ada")).default_repository == "acme/api"

    async def test_profile_model_override_and_flags_round_trip(self, store: AccountsStore) -> None:
        profile = UserProfile(
            user_id="ada",
            model="gpt-5",
            effort="high",
            branch_prefix="ada/",
            draft_prs=True,
            auto_open_pr=False,
            autofix=True,
        )
        await store.save_profile(profile)
        assert await store.profile("ada") == profile

    @pytest.mark.parametrize("prefix", ["../main", "ada/\n"])
    def test_a_branch_prefix_that_git_cannot_use_is_refused(self, prefix: str) -> None:
        with pytest.raises(ValidationError, match="branch prefix"):
            UserProfile(user_id="ada", branch_prefix=prefix)

    async def test_team_models_per_role_round_trip(self, store: AccountsStore) -> None:
        team = TeamDefaults(models={"coder": RoleModel(model="gpt-5", effort="low"), "reviewer": RoleModel(model="o3")})
        await store.save_team(team)
        assert (await store.team()).models["coder"] == RoleModel(model="gpt-5", effort="low")

    def test_team_models_name_known_roles_only(self) -> None:
        with pytest.raises(ValidationError, match="not a role"):
            TeamDefaults(models={"janitor": RoleModel(model="gpt-5")})

    async def test_team_defaults_round_trip(self, store: AccountsStore) -> None:
        assert await store.team() == TeamDefaults()
        team = TeamDefaults(
            default_repository="acme/api", allowed_organizations=("Acme", "tools"), mention_handle="@bot"
        )
        await store.save_team(team)
        assert await store.team() == TeamDefaults(
            default_repository="acme/api", allowed_organizations=("acme", "tools"), mention_handle="@bot"
        )

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("default_repository", "no-slash"),
            ("default_repository", "acme/api\n"),
            ("allowed_organizations", ("bad org",)),
            ("allowed_organizations", ("acme\n",)),
            ("mention_handle", "drydock"),
            ("mention_handle", "@drydock\n"),
        ],
    )
    def test_invalid_team_values_are_refused(self, field: str, value: object) -> None:
        with pytest.raises(ValidationError):
            TeamDefaults.model_validate({field: value})


class TestRepositories:
    async def test_enable_toggle_list_and_remove(self, store: AccountsStore) -> None:
        assert await store.repository("acme/api") is None
        await store.save_repository(RepositorySettings(full_name="acme/api", reviewer=True))
        await store.save_repository(RepositorySettings(full_name="acme/web", coder=False, autofix=True))
        assert await store.repository("ACME/API") == RepositorySettings(full_name="acme/api", reviewer=True)
        assert [r.full_name for r in await store.repositories()] == ["acme/api", "acme/web"]
        assert (await store.repository("acme/web")) == RepositorySettings(
            full_name="acme/web", coder=False, autofix=True
        )
        assert await store.remove_repository("acme/api") is True
        assert await store.remove_repository("acme/api") is False
        assert [r.full_name for r in await store.repositories()] == ["acme/web"]

    async def test_invalid_names_are_refused(self, store: AccountsStore) -> None:
        with pytest.raises(ValueError, match="owner/name"):
            await store.repository("../etc")


class TestForRun:
    async def test_reads_what_a_run_needs_together(self, store: AccountsStore) -> None:
        profile = UserProfile(user_id="ada", model="gpt-5", branch_prefix="ada/")
        ada = UserIdentity(user_id="ada", provider="github", login="ada", name="Ada Lovelace")
        team = TeamDefaults(mention_handle="@bot")
        repository = RepositorySettings(full_name="acme/api", reviewer=True)
        await store.save_profile(profile)
        await store.save_identity(ada)
        await store.save_team(team)
        await store.save_repository(repository)
        found = await store.for_run("ada", "ACME/API")
        assert (found.profile, found.identity, found.team, found.repository) == (profile, ada, team, repository)

    async def test_without_a_user_or_repository_only_the_team_is_read(self, store: AccountsStore) -> None:
        await store.save_team(TeamDefaults(mention_handle="@bot"))
        found = await store.for_run(None, None)
        assert (found.profile, found.identity, found.team, found.repository) == (
            None,
            None,
            TeamDefaults(mention_handle="@bot"),
            None,
        )

    async def test_a_user_never_seen_and_a_repository_not_enabled(self, store: AccountsStore) -> None:
        found = await store.for_run("grace", "acme/web")
        assert (found.profile, found.identity, found.team, found.repository) == (
            UserProfile(user_id="grace"),
            None,
            TeamDefaults(),
            None,
        )

    async def test_an_invalid_repository_name_is_refused(self, store: AccountsStore) -> None:
        with pytest.raises(ValueError, match="owner/name"):
            await store.for_run("ada", "../etc")


class TestMembershipCache:
    async def test_answers_are_shared_and_expire(self, redis: Redis, keys: Keys) -> None:
        cache = MembershipCache(redis, keys, host="github.com", ttl=timedelta(milliseconds=200))
        other_replica = MembershipCache(redis, keys, host="github.com", ttl=timedelta(milliseconds=200))
        assert await cache.get("acme", "alice") is None
        await cache.put("acme", "Alice", True)
        await cache.put("acme", "bob", False)
        assert await other_replica.get("ACME", "alice") is True
        assert await other_replica.get("acme", "bob") is False
        await asyncio.sleep(0.3)
        assert await cache.get("acme", "alice") is None
