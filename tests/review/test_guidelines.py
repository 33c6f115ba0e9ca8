"""The guidelines store on real Valkey: versions, provenance, approval, edits."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.review.guidelines import (
    ApprovalState,
    Guideline,
    GuidelineSource,
    GuidelinesStore,
    GuidelinesVersion,
    Provenance,
    UnknownVersion,
    render,
)

REPOSITORY = "acme/widgets"
RULE = Guideline(
    text="Close files with a context manager.",
    category="resources",
    sources=(GuidelineSource(kind="review_comment", pull_request=3, comment_id=41, author="carol"),),
)


@pytest.fixture
def store(redis: Redis, keys: Keys) -> GuidelinesStore:
    return GuidelinesStore(redis, keys, host="github.com")


class TestVersions:
    async def test_versions_are_numbered_per_repository_and_keep_their_provenance(self, store: GuidelinesStore) -> None:
        assert await store.current(REPOSITORY) is None
        assert await store.history(REPOSITORY) == []
        first = await store.save(REPOSITORY, [RULE], Provenance(mode="bootstrap", evidence={"comments": 12}))
        second = await store.save(REPOSITORY, [RULE, RULE], Provenance(mode="continual", based_on=first))
        other = await store.save("acme/gadgets", [RULE], Provenance(mode="bootstrap"))
        assert (first, second, other) == (1, 2, 1)

        history = await store.history(REPOSITORY)
        assert [item.version for item in history] == [2, 1]
        assert history[1].rules[0].sources[0].comment_id == 41
        assert history[1].provenance.evidence == {"comments": 12}
        assert history[0].provenance.based_on == 1
        assert all(item.approval.state is ApprovalState.PENDING for item in history)

    async def test_concurrent_saves_get_distinct_numbers(self, store: GuidelinesStore) -> None:
        numbers = await asyncio.gather(
            *(store.save(REPOSITORY, [RULE], Provenance(mode="continual")) for _ in range(20))
        )
        assert sorted(numbers) == list(range(1, 21))

    async def test_too_many_rules_are_refused(self, store: GuidelinesStore) -> None:
        with pytest.raises(ValueError, match="at most"):
            await store.save(REPOSITORY, [RULE] * 101, Provenance(mode="bootstrap"))


class TestApproval:
    async def test_current_is_the_newest_approved_version(self, store: GuidelinesStore) -> None:
        await store.save(REPOSITORY, [RULE], Provenance(mode="bootstrap"))
        await store.save(REPOSITORY, [RULE], Provenance(mode="continual"))
        assert await store.current(REPOSITORY) is None

        approved = await store.approve(REPOSITORY, 1, by="ada")
        assert approved.approved
        assert approved.approval.by == "ada"
        assert approved.approval.at is not None
        current = await store.current(REPOSITORY)
        assert current is not None
        assert current.version == 1

        await store.reject(REPOSITORY, 2, by="ada", note="too strict")
        current = await store.current(REPOSITORY)
        assert current is not None
        assert current.version == 1
        latest = await store.latest(REPOSITORY)
        assert latest is not None
        assert latest.approval.note == "too strict"

    async def test_an_unknown_version_cannot_be_approved(self, store: GuidelinesStore) -> None:
        with pytest.raises(UnknownVersion):
            await store.approve(REPOSITORY, 7, by="ada")
        assert await store.get(REPOSITORY, 7) is None

    async def test_saving_approved_skips_the_review(self, store: GuidelinesStore) -> None:
        version = await store.save(REPOSITORY, [RULE], Provenance(mode="bootstrap"), approved_by="auto")
        current = await store.current(REPOSITORY)
        assert current is not None
        assert current.version == version


class TestEdits:
    async def test_an_edit_is_a_new_version_approved_by_its_author(self, store: GuidelinesStore) -> None:
        await store.save(REPOSITORY, [RULE], Provenance(mode="bootstrap"))
        edited = await store.edit(REPOSITORY, [Guideline(text="Prefer pathlib.")], by="ada", based_on=1)
        current = await store.current(REPOSITORY)
        assert current is not None
        assert current.version == edited == 2
        assert current.provenance.mode == "edit"
        assert current.provenance.by == "ada"
        assert render(current) == "1. Prefer pathlib."

    async def test_an_edit_of_an_unknown_version_is_refused(self, store: GuidelinesStore) -> None:
        with pytest.raises(UnknownVersion):
            await store.edit(REPOSITORY, [RULE], by="ada", based_on=3)


class TestRender:
    def test_rules_render_as_a_numbered_list_with_categories(self) -> None:
        version = GuidelinesVersion(
            repository=REPOSITORY,
            version=1,
            rules=(RULE, Guideline(text="Name tests after behaviour.")),
            provenance=Provenance(mode="bootstrap"),
            created_at=datetime.now(UTC),
        )
        assert render(version) == "1. [resources] Close files with a context manager.\n2. Name tests after behaviour."
