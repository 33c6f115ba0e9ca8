"""The findings store on real Valkey: ids, fingerprint de-duplication, status changes, and
concurrent writers."""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.review.diff import Side
from drydock.review.findings import (
    Draft,
    FindingStatus,
    FindingStore,
    Severity,
    UnknownFinding,
    close,
    fingerprint,
)

REPOSITORY = "acme/widgets"
HEAD, NEXT = "a" * 40, "b" * 40


def draft(title: str = "Division by zero", line: int = 6, category: str = "correctness") -> Draft:
    return Draft(Severity.HIGH, 0.9, category, title, "calc.py", line, line, Side.RIGHT, "`div(a, 0)` raises.")


@pytest.fixture
def store(redis: Redis, keys: Keys, thread_id: str) -> FindingStore:
    return FindingStore(redis, keys, thread_id, host="github.com", repository=REPOSITORY)


class TestFingerprint:
    def test_it_ignores_line_numbers_and_whitespace_but_not_the_code(self) -> None:
        moved = fingerprint(draft(line=60), ["    return  a / b"])
        assert fingerprint(draft(), ["    return a / b"]) == moved
        assert fingerprint(draft(title="Division  by zero!"), ["return a / b"]) == moved
        assert fingerprint(draft(), ["return a // b"]) != moved
        assert fingerprint(draft(category="style"), ["return a / b"]) != moved


class TestAdding:
    async def test_findings_get_sequential_ids_and_keep_their_fields(self, store: FindingStore) -> None:
        first = await store.add(draft(), head_sha=HEAD, anchored=["return a / b"])
        second = await store.add(draft("Mean of nothing", 10), head_sha=HEAD, anchored=["return s / n"])
        assert (first.finding.id, second.finding.id) == ("F1", "F2")
        assert first.created
        found = await store.get("F1")
        assert (found.severity, found.status, found.first_seen_sha, found.published) == (
            Severity.HIGH, FindingStatus.OPEN, HEAD, False,
        )  # fmt: skip
        assert [f.id for f in await store.all()] == ["F1", "F2"]

    async def test_an_open_finding_found_again_is_confirmed_not_added(self, store: FindingStore) -> None:
        await store.add(draft(), head_sha=HEAD, anchored=["return a / b"])
        again = await store.add(draft(line=8), head_sha=NEXT, anchored=["return a / b"])
        assert not again.created
        assert again.finding.id == "F1"
        assert again.finding.last_confirmed_sha == NEXT
        assert again.finding.start_line == 6
        assert len(await store.all()) == 1

    async def test_a_dismissed_finding_stays_dismissed(self, store: FindingStore) -> None:
        await store.add(draft(), head_sha=HEAD, anchored=["return a / b"])
        await store.update("F1", lambda f: close(f, FindingStatus.DISMISSED, note="fine", by="ada", head_sha=HEAD))
        again = await store.add(draft(), head_sha=NEXT, anchored=["return a / b"])
        assert not again.created
        assert again.finding.status is FindingStatus.DISMISSED

    async def test_a_resolved_finding_that_comes_back_is_a_new_one(self, store: FindingStore) -> None:
        await store.add(draft(), head_sha=HEAD, anchored=["return a / b"])
        await store.update("F1", lambda f: close(f, FindingStatus.RESOLVED, note=None, by="reviewer", head_sha=NEXT))
        again = await store.add(draft(), head_sha=NEXT, anchored=["return a / b"])
        assert again.created
        assert again.finding.id == "F2"

    async def test_concurrent_adds_of_one_problem_record_it_once(self, store: FindingStore) -> None:
        results = await asyncio.gather(*(store.add(draft(), head_sha=HEAD, anchored=["x"]) for _ in range(10)))
        assert sum(result.created for result in results) == 1
        assert {result.finding.id for result in results} == {"F1"}

    async def test_concurrent_adds_of_distinct_problems_get_distinct_ids(self, store: FindingStore) -> None:
        results = await asyncio.gather(
            *(store.add(draft(f"Problem {n}"), head_sha=HEAD, anchored=["x"]) for n in range(15))
        )
        assert sorted(int(result.finding.id[1:]) for result in results) == list(range(1, 16))

    async def test_the_repository_index_notes_the_thread(
        self, store: FindingStore, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        await store.add(draft(), head_sha=HEAD)
        score = await redis.zscore(keys.repository_reviews("github.com", REPOSITORY), thread_id)
        assert score is not None
        assert abs(score - time.time()) < 60


class TestUpdating:
    async def test_closing_a_published_finding_queues_its_note_as_a_reply(self, store: FindingStore) -> None:
        await store.add(draft(), head_sha=HEAD)
        await store.update("F1", lambda f: f.model_copy(update={"comment_id": 99}))
        closed = await store.update(
            "F1", lambda f: close(f, FindingStatus.RESOLVED, note="Fixed in b.", by="reviewer", head_sha=NEXT)
        )
        assert (closed.status, closed.reply, closed.closed_sha) == (FindingStatus.RESOLVED, "Fixed in b.", NEXT)

    async def test_concurrent_updates_are_not_lost(self, store: FindingStore) -> None:
        await store.add(draft(), head_sha=HEAD)

        async def bump(_: int) -> None:
            await store.update("F1", lambda f: f.model_copy(update={"confidence": round(f.confidence - 0.01, 2)}))

        await asyncio.gather(*(bump(n) for n in range(20)))
        assert (await store.get("F1")).confidence == pytest.approx(0.7)

    async def test_update_many_changes_several_in_one_transaction(self, store: FindingStore) -> None:
        for n in range(3):
            await store.add(draft(f"Problem {n}"), head_sha=HEAD)
        changed = await store.update_many(
            ["F1", "F3"], lambda found: [f.model_copy(update={"comment_id": 7}) for f in found]
        )
        assert [f.id for f in changed] == ["F1", "F3"]
        assert [f.published for f in await store.all()] == [True, False, True]

    async def test_an_unknown_finding_is_refused(self, store: FindingStore) -> None:
        with pytest.raises(UnknownFinding, match="no finding F9"):
            await store.update("F9", lambda f: f)
        with pytest.raises(UnknownFinding):
            await store.get("F9")

    async def test_published_reviews_are_recorded_by_head(self, store: FindingStore) -> None:
        assert await store.reviews() == {}
        await store.record_review(HEAD, 41)
        assert await store.reviews() == {HEAD: 41}
        assert await store.all() == []
