"""Link codes on real Valkey: a Slack or Linear account links only by sending a code the
dashboard issued, once, in time, from the account itself, and guessing is bounded."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from redis.asyncio import Redis

from drydock.accounts import AccountsStore, LinkCodes, Outcome, Provider
from drydock.accounts.link_codes import CODE_ALPHABET, MAX_ATTEMPTS, normalize
from drydock.channels.text import link_command
from drydock.infra.redis import Keys


@pytest.fixture
def accounts(redis: Redis, keys: Keys) -> AccountsStore:
    return AccountsStore(redis, keys, host="github.com")


@pytest.fixture
def codes(redis: Redis, keys: Keys, accounts: AccountsStore) -> LinkCodes:
    return LinkCodes(redis, keys, accounts)


def wrong(code: str) -> str:
    """``code`` with its last character changed."""
    last = code[-1]
    return code[:-1] + next(char for char in CODE_ALPHABET if char != last)


class TestIssue:
    async def test_a_code_is_shown_in_groups_and_stored_only_hashed(
        self, codes: LinkCodes, redis: Redis, keys: Keys
    ) -> None:
        issued = await codes.issue("ada", Provider.SLACK)
        assert len(issued.code) == 14
        assert issued.code.count("-") == 2
        assert normalize(issued.code.lower()) == issued.code.replace("-", "")
        stored = [key async for key in redis.scan_iter(match=f"{keys.prefix}:*")]
        values = [await redis.get(key) for key in stored]
        assert issued.code.replace("-", "") not in " ".join([*stored, *map(str, values)])

    async def test_a_code_is_a_pending_link_that_confers_nothing(
        self, codes: LinkCodes, accounts: AccountsStore
    ) -> None:
        await codes.issue("ada", Provider.SLACK)
        (pending,) = await codes.pending("ada")
        assert pending.provider is Provider.SLACK
        assert await accounts.user_for(Provider.SLACK, "U1") is None
        assert await accounts.accounts_of("ada") == []

    async def test_github_accounts_are_not_linked_with_codes(self, codes: LinkCodes) -> None:
        with pytest.raises(ValueError, match="github"):
            await codes.issue("ada", Provider.GITHUB)


class TestRedeem:
    async def test_the_code_links_its_sender_to_the_user(self, codes: LinkCodes, accounts: AccountsStore) -> None:
        issued = await codes.issue("ada", Provider.SLACK)
        redemption = await codes.redeem(Provider.SLACK, "U1", issued.code.lower())
        assert (redemption.outcome, redemption.user_id) == (Outcome.LINKED, "ada")
        assert await accounts.user_for(Provider.SLACK, "U1") == "ada"
        assert await codes.pending("ada") == []

    async def test_a_code_from_another_account_links_that_account_only(
        self, codes: LinkCodes, accounts: AccountsStore
    ) -> None:
        issued = await codes.issue("ada", Provider.LINEAR)
        assert (await codes.redeem(Provider.LINEAR, "lin-other", issued.code)).outcome is Outcome.LINKED
        assert await accounts.user_for(Provider.LINEAR, "lin-other") == "ada"
        assert await accounts.user_for(Provider.LINEAR, "lin-ada") is None
        assert await accounts.accounts_of("ada") == [(Provider.LINEAR, "lin-other")]

    async def test_a_wrong_code_is_refused(self, codes: LinkCodes, accounts: AccountsStore) -> None:
        issued = await codes.issue("ada", Provider.SLACK)
        assert (await codes.redeem(Provider.SLACK, "U1", wrong(issued.code))).outcome is Outcome.INVALID
        assert (await codes.redeem(Provider.SLACK, "U1", "not a code")).outcome is Outcome.INVALID
        assert await accounts.user_for(Provider.SLACK, "U1") is None

    async def test_a_code_of_another_provider_is_refused(self, codes: LinkCodes, accounts: AccountsStore) -> None:
        issued = await codes.issue("ada", Provider.SLACK)
        assert (await codes.redeem(Provider.LINEAR, "lin-1", issued.code)).outcome is Outcome.INVALID
        assert await accounts.user_for(Provider.LINEAR, "lin-1") is None

    async def test_an_expired_code_is_refused(self, redis: Redis, keys: Keys, accounts: AccountsStore) -> None:
        codes = LinkCodes(redis, keys, accounts, ttl=timedelta(milliseconds=200))
        issued = await codes.issue("ada", Provider.SLACK)
        deadline = asyncio.get_running_loop().time() + 5
        while await codes.pending("ada"):
            assert asyncio.get_running_loop().time() < deadline, "the code did not expire"
            await asyncio.sleep(0.05)
        assert (await codes.redeem(Provider.SLACK, "U1", issued.code)).outcome is Outcome.INVALID
        assert await accounts.user_for(Provider.SLACK, "U1") is None

    async def test_a_used_code_is_refused(self, codes: LinkCodes, accounts: AccountsStore) -> None:
        issued = await codes.issue("ada", Provider.SLACK)
        await codes.redeem(Provider.SLACK, "U1", issued.code)
        assert (await codes.redeem(Provider.SLACK, "U2", issued.code)).outcome is Outcome.INVALID
        assert (await codes.redeem(Provider.SLACK, "U1", issued.code)).outcome is Outcome.ALREADY_USED
        assert await accounts.user_for(Provider.SLACK, "U2") is None

    async def test_a_newer_code_replaces_the_older(self, codes: LinkCodes, accounts: AccountsStore) -> None:
        older = await codes.issue("ada", Provider.SLACK)
        newer = await codes.issue("ada", Provider.SLACK)
        assert (await codes.redeem(Provider.SLACK, "U1", older.code)).outcome is Outcome.INVALID
        assert (await codes.redeem(Provider.SLACK, "U1", newer.code)).outcome is Outcome.LINKED

    async def test_a_cancelled_code_is_refused(self, codes: LinkCodes) -> None:
        issued = await codes.issue("ada", Provider.SLACK)
        assert await codes.cancel("ada", Provider.SLACK)
        assert not await codes.cancel("ada", Provider.SLACK)
        assert (await codes.redeem(Provider.SLACK, "U1", issued.code)).outcome is Outcome.INVALID

    async def test_an_account_linked_to_someone_else_stays_theirs(
        self, codes: LinkCodes, accounts: AccountsStore
    ) -> None:
        await accounts.link(Provider.SLACK, "U1", "grace")
        issued = await codes.issue("ada", Provider.SLACK)
        assert (await codes.redeem(Provider.SLACK, "U1", issued.code)).outcome is Outcome.TAKEN
        assert await accounts.user_for(Provider.SLACK, "U1") == "grace"


class TestGuessing:
    async def test_an_account_gets_a_bounded_number_of_tries(self, codes: LinkCodes, accounts: AccountsStore) -> None:
        issued = await codes.issue("ada", Provider.SLACK)
        outcomes = [(await codes.redeem(Provider.SLACK, "U1", wrong(issued.code))).outcome for _ in range(MAX_ATTEMPTS)]
        assert outcomes == [Outcome.INVALID] * MAX_ATTEMPTS
        assert (await codes.redeem(Provider.SLACK, "U1", issued.code)).outcome is Outcome.LIMITED
        assert await accounts.user_for(Provider.SLACK, "U1") is None
        assert (await codes.redeem(Provider.SLACK, "U2", issued.code)).outcome is Outcome.LINKED

    async def test_the_bound_lifts_after_its_window(self, redis: Redis, keys: Keys, accounts: AccountsStore) -> None:
        codes = LinkCodes(redis, keys, accounts, max_attempts=1, attempt_window=timedelta(milliseconds=200))
        issued = await codes.issue("ada", Provider.SLACK)
        await codes.redeem(Provider.SLACK, "U1", wrong(issued.code))
        assert (await codes.redeem(Provider.SLACK, "U1", issued.code)).outcome is Outcome.LIMITED
        deadline = asyncio.get_running_loop().time() + 5
        while (outcome := (await codes.redeem(Provider.SLACK, "U1", issued.code)).outcome) is Outcome.LIMITED:
            assert asyncio.get_running_loop().time() < deadline, "the bound did not lift"
            await asyncio.sleep(0.05)
        assert outcome is Outcome.LINKED


class TestCodeShape:
    async def test_every_issued_code_is_read_back_from_a_message(self, codes: LinkCodes) -> None:
        for _ in range(50):
            issued = await codes.issue("ada", Provider.SLACK)
            assert link_command(f"<@U0DRYBOT> link {issued.code}", "@drydock") == issued.code
