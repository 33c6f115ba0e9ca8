"""Publishing findings as one GitHub review, against the fake GitHub and real Valkey."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.review.diff import Side
from drydock.review.findings import Draft, FindingStatus, FindingStore, Severity, close
from drydock.review.publish import Published, PublishPolicy, comment_body, finding_marker, publish, reply_marker
from drydock.review.target import ReviewTarget, fetch_target
from tests.fakes.github.activity import activity_of
from tests.fakes.github.reviews import reviews_of
from tests.review.conftest import HEAD, NUMBER, REPOSITORY, GithubWorld

NEXT = "b" * 40


@pytest.fixture
def store(redis: Redis, keys: Keys, thread_id: str) -> FindingStore:
    return FindingStore(redis, keys, thread_id, host="github.com", repository=REPOSITORY)


async def add(
    store: FindingStore, title: str, line: int, severity: Severity = Severity.HIGH, suggestion: str | None = None
) -> str:
    draft = Draft(severity, 0.8, "correctness", title, "calc.py", line, line, Side.RIGHT, f"{title}.", suggestion)
    return (await store.add(draft, head_sha=HEAD, anchored=[title])).finding.id


class Publisher:
    def __init__(self, world: GithubWorld, store: FindingStore, redis: Redis, keys: Keys) -> None:
        self.world, self.store, self.redis, self.keys = world, store, redis, keys

    async def target(self) -> ReviewTarget:
        return await fetch_target(self.world.client, self.world.authorization, REPOSITORY, NUMBER)

    async def __call__(self, policy: PublishPolicy | None = None, summary: str = "") -> Published:
        return await publish(
            client=self.world.client, authorization=self.world.authorization, target=await self.target(),
            store=self.store, redis=self.redis, keys=self.keys, policy=policy or PublishPolicy(), summary=summary,
        )  # fmt: skip


@pytest.fixture
def publisher(world: GithubWorld, store: FindingStore, redis: Redis, keys: Keys) -> Publisher:
    world.pull()
    return Publisher(world, store, redis, keys)


class TestReview:
    async def test_open_findings_become_the_inline_comments_of_one_review(
        self, publisher: Publisher, store: FindingStore, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        await add(store, "Division by zero", 6, suggestion="    return a / b if b else 0.0")
        await add(store, "Empty mean", 10, Severity.MEDIUM)
        result = await publisher(summary="Two problems.")

        state = reviews_of(publisher.world.fake.state)
        assert result.posted == ["F1", "F2"]
        assert len(state.reviews) == 1
        review = next(iter(state.reviews.values()))
        assert review.commit_id == HEAD
        assert review.body.startswith("Two problems.\n\nReviewed `aaaaaaaaaaaa`: 2 new findings (1 high, 1 medium).")
        assert f"<!-- drydock:review:{HEAD} -->" in review.body
        assert result.review_url is not None
        findings = await store.all()
        comments = activity_of(publisher.world.fake.state).comments
        for finding in findings:
            assert finding.comment_id is not None
            assert finding.published_sha == HEAD
            assert finding_marker(finding.id) in comments[finding.comment_id].body
            thread = await redis.get(keys.finding_comment("github.com", REPOSITORY, finding.comment_id))
            assert thread == thread_id
        assert "```suggestion\n    return a / b if b else 0.0\n```" in comments[findings[0].comment_id or 0].body

    async def test_publishing_twice_posts_once(self, publisher: Publisher, store: FindingStore) -> None:
        await add(store, "Division by zero", 6)
        await publisher()
        again = await publisher()
        assert again.nothing_new
        assert len(reviews_of(publisher.world.fake.state).reviews) == 1

    async def test_a_review_without_findings_is_posted_once(self, publisher: Publisher) -> None:
        first = await publisher(summary="Looks good.")
        second = await publisher(summary="Looks good.")
        assert first.review_id is not None
        assert second.nothing_new
        reviews = list(reviews_of(publisher.world.fake.state).reviews.values())
        assert len(reviews) == 1
        assert "0 new findings" in reviews[0].body

    async def test_the_threshold_and_the_cap_hold_findings_back_and_the_summary_names_them(
        self, publisher: Publisher, store: FindingStore
    ) -> None:
        await add(store, "Info only", 5, Severity.INFO)
        await add(store, "Minor", 6, Severity.LOW)
        await add(store, "Critical", 9, Severity.CRITICAL)
        await add(store, "Serious", 10, Severity.HIGH)
        result = await publisher(PublishPolicy(min_severity=Severity.LOW, max_comments=2))
        assert result.posted == ["F3", "F4"]
        assert sorted(result.held_back) == ["F1", "F2"]
        body = next(iter(reviews_of(publisher.world.fake.state).reviews.values())).body
        assert "F1 (info) `calc.py:5` Info only: below the low threshold" in body
        assert "F2 (low) `calc.py:6` Minor: beyond the cap of 2 comments" in body

    async def test_a_finding_whose_lines_left_the_diff_is_not_posted_inline(
        self, publisher: Publisher, store: FindingStore
    ) -> None:
        await add(store, "Division by zero", 6)
        publisher.world.pull(head=NEXT, patch="@@ -1,2 +1,3 @@\n def add(a, b):\n     return a - b\n+# done")
        result = await publisher()
        assert result.posted == []
        assert result.held_back == ["F1"]
        assert "no longer in the diff" in next(iter(reviews_of(publisher.world.fake.state).reviews.values())).body


class TestReReview:
    async def test_a_re_review_posts_only_new_findings(self, publisher: Publisher, store: FindingStore) -> None:
        await add(store, "Division by zero", 6)
        await publisher()
        await add(store, "Empty mean", 10)
        publisher.world.pull(head=NEXT)
        result = await publisher()
        assert result.posted == ["F2"]
        state = reviews_of(publisher.world.fake.state)
        latest = max(state.reviews.values(), key=lambda review: review.id)
        assert latest.commit_id == NEXT
        assert [p.line for p in state.placements.values() if p.review_id == latest.id] == [10]
        assert "1 earlier finding still open" in latest.body

    async def test_a_resolved_finding_gets_a_reply_and_its_thread_resolved_once(
        self, publisher: Publisher, store: FindingStore
    ) -> None:
        await add(store, "Division by zero", 6)
        await publisher()
        await store.update(
            "F1", lambda f: close(f, FindingStatus.RESOLVED, note="Fixed.", by="reviewer", head_sha=NEXT)
        )
        result = await publisher()
        assert (result.replied, result.resolved_threads, result.review_id) == (["F1"], ["F1"], None)
        again = await publisher()
        assert again.nothing_new

        finding = await store.get("F1")
        assert finding.thread_resolved
        assert finding.reply is None
        assert finding.review_thread_id is not None
        comments = activity_of(publisher.world.fake.state).comments
        replies = [c for c in comments.values() if c.in_reply_to == finding.comment_id]
        assert [reply.body.split("\n")[0] for reply in replies] == ["Fixed."]
        thread = reviews_of(publisher.world.fake.state).thread_of(finding.comment_id or 0)
        assert thread is not None
        assert (thread.resolved, thread.resolved_by) == (True, "drydock[bot]")

    async def test_a_note_on_an_open_finding_is_posted_without_resolving_its_thread(
        self, publisher: Publisher, store: FindingStore
    ) -> None:
        await add(store, "Division by zero", 6)
        await publisher()
        await store.update("F1", lambda f: f.model_copy(update={"note": "Still applies.", "reply": "Still applies."}))
        result = await publisher()
        assert (result.replied, result.resolved_threads) == (["F1"], [])
        finding = await store.get("F1")
        thread = reviews_of(publisher.world.fake.state).thread_of(finding.comment_id or 0)
        assert thread is not None
        assert not thread.resolved


class TestCrashRecovery:
    async def test_comments_of_a_publish_that_crashed_are_reconciled_not_repeated(
        self, publisher: Publisher, store: FindingStore, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        await add(store, "Division by zero", 6)
        await add(store, "Empty mean", 10)
        crashed = await store.get("F1")
        # What a publish that died after GitHub accepted its review left behind.
        await publisher.world.client.create_review(
            publisher.world.authorization, REPOSITORY, NUMBER, commit_id=HEAD, body="interrupted",
            comments=[{"path": "calc.py", "line": 6, "side": "RIGHT", "body": comment_body(crashed)}],
        )  # fmt: skip
        result = await publisher()
        assert result.reconciled == ["F1"]
        assert result.posted == ["F2"]
        state = reviews_of(publisher.world.fake.state)
        assert sorted(p.line or 0 for p in state.placements.values()) == [6, 10]
        f1 = await store.get("F1")
        assert f1.comment_id is not None
        assert await redis.get(keys.finding_comment("github.com", REPOSITORY, f1.comment_id)) == thread_id

    async def test_a_reply_posted_before_a_crash_is_not_posted_again(
        self, publisher: Publisher, store: FindingStore
    ) -> None:
        await add(store, "Division by zero", 6)
        await publisher()
        await store.update(
            "F1", lambda f: close(f, FindingStatus.RESOLVED, note="Fixed.", by="reviewer", head_sha=NEXT)
        )
        finding = await store.get("F1")
        await publisher.world.client.reply_in_review_thread(
            publisher.world.authorization, REPOSITORY, NUMBER, finding.comment_id or 0,
            f"Fixed.\n\n{reply_marker('F1', 'Fixed.')}",
        )  # fmt: skip
        await publisher()
        comments = activity_of(publisher.world.fake.state).comments.values()
        assert len([c for c in comments if c.in_reply_to == finding.comment_id]) == 1

    async def test_a_summary_review_posted_before_a_crash_is_found_by_its_marker(self, publisher: Publisher) -> None:
        await publisher.world.client.create_review(
            publisher.world.authorization, REPOSITORY, NUMBER, commit_id=HEAD,
            body=f"Looks good.\n\n<!-- drydock:review:{HEAD} -->", comments=[],
        )  # fmt: skip
        assert (await publisher()).nothing_new
        assert len(reviews_of(publisher.world.fake.state).reviews) == 1
