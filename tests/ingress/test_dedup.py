"""Done marks: they ride on the next delivery's lookup round trip, ahead of its claim, or are
written alone shortly after when no delivery follows; a redelivery never passes for a new
delivery while its first's mark waits. Replays: a signed body sent again under another
delivery id is known by the object it delivers, and routed once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from redis.asyncio import Redis

from drydock.accounts import Provider
from drydock.channels.intents import DELIVERY_DONE, DELIVERY_PENDING
from drydock.infra.redis import Batch, BatchConnections, Keys
from drydock.roles import Role
from drydock.threads import ids
from services.ingress.dedup import ClaimResult, Deliveries
from services.ingress.routing import Publish, Route
from tests.fakes import linear as fake_linear
from tests.fakes import signing
from tests.fakes.github import webhooks
from tests.ingress.conftest import GITHUB_SECRET, HOST, LINEAR_SECRET, ORG, StartIngress, link, trust
from tests.waiting import eventually


@pytest.fixture
async def deliveries(redis: Redis, keys: Keys) -> AsyncIterator[Deliveries]:
    batches = BatchConnections(redis)
    yield Deliveries(
        redis,
        batches,
        keys,
        ttl=timedelta(hours=24),
        claim_ttl=timedelta(minutes=10),
        write_timeout=timedelta(seconds=5),
    )
    await batches.aclose()


async def claim(
    deliveries: Deliveries,
    batches: BatchConnections,
    delivery_id: str,
    identity: str | None = None,
    channel: str = "github",
) -> ClaimResult:
    """One lookup round trip's part: the waiting marks, then the claims."""
    batch = Batch(batches)
    marks = deliveries.queue_marks(batch)
    deliveries.queue_claim(batch, channel, delivery_id, identity)
    replies = await batch.execute()
    deliveries.marks_written(marks)
    return deliveries.claim_result(replies[len(marks) :], channel, delivery_id, identity)


class TestDoneMarks:
    async def test_a_mark_rides_ahead_of_the_next_claim(self, deliveries: Deliveries, redis: Redis, keys: Keys) -> None:
        batches = BatchConnections(redis)
        first, other = uuid.uuid4().hex, uuid.uuid4().hex
        try:
            assert await claim(deliveries, batches, first) is ClaimResult.CLAIMED
            deliveries.done("github", first)
            assert await claim(deliveries, batches, other) is ClaimResult.CLAIMED
            assert await redis.get(keys.delivery("github", first)) == DELIVERY_DONE
            assert await claim(deliveries, batches, first) is ClaimResult.DUPLICATE
        finally:
            await deliveries.aclose()
            await batches.aclose()

    async def test_the_redelivery_carrying_its_own_mark_is_a_duplicate(
        self, deliveries: Deliveries, redis: Redis
    ) -> None:
        batches = BatchConnections(redis)
        delivery = uuid.uuid4().hex
        try:
            await claim(deliveries, batches, delivery)
            deliveries.done("github", delivery)
            assert await claim(deliveries, batches, delivery) is ClaimResult.DUPLICATE
        finally:
            await deliveries.aclose()
            await batches.aclose()

    async def test_a_mark_is_written_alone_when_no_delivery_follows(
        self, deliveries: Deliveries, redis: Redis, keys: Keys
    ) -> None:
        batches = BatchConnections(redis)
        delivery = uuid.uuid4().hex
        try:
            await claim(deliveries, batches, delivery)
            deliveries.done("github", delivery)

            async def written() -> bool:
                return await redis.get(keys.delivery("github", delivery)) == DELIVERY_DONE

            await eventually(written, within=5, what="the done mark written")
            assert await redis.pttl(keys.delivery("github", delivery)) > timedelta(hours=23).total_seconds() * 1000
        finally:
            await deliveries.aclose()
            await batches.aclose()

    async def test_a_pending_claim_whose_mark_waits_here_is_a_duplicate(
        self, deliveries: Deliveries, redis: Redis, keys: Keys
    ) -> None:
        delivery = uuid.uuid4().hex
        deliveries.done("github", delivery)
        assert deliveries.claim_result([DELIVERY_PENDING], "github", delivery) is ClaimResult.DUPLICATE
        assert deliveries.claim_result([DELIVERY_PENDING], "github", uuid.uuid4().hex) is ClaimResult.IN_PROGRESS
        await deliveries.aclose()
        assert await redis.get(keys.delivery("github", delivery)) == DELIVERY_DONE
        assert deliveries.claim_result([DELIVERY_PENDING], "github", delivery) is ClaimResult.IN_PROGRESS


COMMENT = "issue_comment.created:1001"


class TestObjectClaims:
    async def test_another_delivery_id_for_a_claimed_object_is_a_replay(
        self, deliveries: Deliveries, redis: Redis
    ) -> None:
        batches = BatchConnections(redis)
        first, replay = uuid.uuid4().hex, uuid.uuid4().hex
        try:
            assert await claim(deliveries, batches, first, COMMENT) is ClaimResult.CLAIMED
            assert await claim(deliveries, batches, replay, COMMENT) is ClaimResult.REPLAY
            assert await claim(deliveries, batches, first, COMMENT) is ClaimResult.IN_PROGRESS
        finally:
            await deliveries.aclose()
            await batches.aclose()

    async def test_a_done_object_keeps_its_first_delivery_id_for_the_full_ttl(
        self, deliveries: Deliveries, redis: Redis, keys: Keys
    ) -> None:
        batches = BatchConnections(redis)
        first = uuid.uuid4().hex
        try:
            await claim(deliveries, batches, first, COMMENT)
            deliveries.done("github", first, COMMENT)
            assert await claim(deliveries, batches, uuid.uuid4().hex, COMMENT) is ClaimResult.REPLAY
            assert await redis.get(keys.delivered_object("github", COMMENT)) == first
            assert (
                await redis.pttl(keys.delivered_object("github", COMMENT)) > timedelta(hours=23).total_seconds() * 1000
            )
            assert await claim(deliveries, batches, first, COMMENT) is ClaimResult.DUPLICATE
        finally:
            await deliveries.aclose()
            await batches.aclose()

    async def test_a_replay_is_done_without_taking_the_object(
        self, deliveries: Deliveries, redis: Redis, keys: Keys
    ) -> None:
        batches = BatchConnections(redis)
        first, replay = uuid.uuid4().hex, uuid.uuid4().hex
        try:
            await claim(deliveries, batches, first, COMMENT)
            assert await claim(deliveries, batches, replay, COMMENT) is ClaimResult.REPLAY
            deliveries.done("github", replay)
            await deliveries.aclose()
            assert await redis.get(keys.delivered_object("github", COMMENT)) == first
            assert await claim(deliveries, batches, replay, COMMENT) is ClaimResult.DUPLICATE
        finally:
            await batches.aclose()

    async def test_a_release_forgets_both_claims(self, deliveries: Deliveries, redis: Redis) -> None:
        batches = BatchConnections(redis)
        first = uuid.uuid4().hex
        try:
            await claim(deliveries, batches, first, COMMENT)
            await deliveries.release("github", first, COMMENT)
            assert await claim(deliveries, batches, uuid.uuid4().hex, COMMENT) is ClaimResult.CLAIMED
        finally:
            await deliveries.aclose()
            await batches.aclose()

    async def test_objects_of_other_kinds_and_channels_do_not_collide(
        self, deliveries: Deliveries, redis: Redis
    ) -> None:
        batches = BatchConnections(redis)
        try:
            assert await claim(deliveries, batches, uuid.uuid4().hex, COMMENT) is ClaimResult.CLAIMED
            for channel, identity in [
                ("github", "pull_request_review_comment.created:1001"),
                ("github", "issues.opened:1001"),
                ("linear", COMMENT),
            ]:
                assert await claim(deliveries, batches, uuid.uuid4().hex, identity, channel) is ClaimResult.CLAIMED
        finally:
            await deliveries.aclose()
            await batches.aclose()


def github_mention(repo: str) -> signing.SignedRequest:
    return signing.github(GITHUB_SECRET, "issue_comment", webhooks.issue_comment(ORG, repo, 1, "@drydock do it"))


def new_id() -> str:
    return str(uuid.uuid4())


def deliveries_of(kind: str, repo: str) -> list[signing.SignedRequest]:
    """Deliveries that route ``kind`` of object, the last one delivering it."""
    if kind == "issue":
        return [signing.github(GITHUB_SECRET, "issues", webhooks.issues_opened(ORG, repo, 2, "@drydock go", ""))]
    if kind == "review":
        review = webhooks.review(ORG, repo, 3, "@drydock fix this", state="changes_requested")
        return [signing.github(GITHUB_SECRET, "pull_request_review", review)]
    if kind == "review_comment":
        comment = webhooks.review_comment(ORG, repo, 3, "@drydock this line")
        return [signing.github(GITHUB_SECRET, "pull_request_review_comment", comment)]
    issue, session = fake_linear.LinearIssue(new_id(), "DRY-1", "t"), new_id()
    created = signing.linear(
        LINEAR_SECRET, fake_linear.agent_session_created(issue, session, prompt_context=f"go repo:{ORG}/{repo}")
    )
    if kind == "agent_session_created":
        return [created]
    return [created, signing.linear(LINEAR_SECRET, fake_linear.agent_session_prompted(issue, session, "and more"))]


class TestReplays:
    async def test_a_github_comment_sent_again_under_new_delivery_ids_is_routed_once(
        self, start_ingress: StartIngress, repo: str
    ) -> None:
        async with start_ingress() as running:
            await trust(running, repo)
            original = github_mention(repo)
            statuses = [(await running.send(original)).json()["status"]]
            for _ in range(3):
                replay = await running.send(original.with_headers(X_GitHub_Delivery=new_id()))
                assert replay.status_code == 200
                statuses.append(replay.json()["status"])
            assert (await running.send(original)).json()["status"] == "duplicate"
            thread = ids.github_issue(HOST, ORG, repo, 1)
            assert statuses == ["accepted", "duplicate", "duplicate", "duplicate"]
            assert len(await running.inbox(thread)) == 1
            assert await running.wakes(Role.CODER, thread) == 1

    async def test_a_linear_comment_sent_again_under_a_new_or_no_delivery_id_is_routed_once(
        self, start_ingress: StartIngress, repo: str
    ) -> None:
        async with start_ingress() as running:
            await trust(running, repo)
            await link(running, Provider.LINEAR, "user-human-1", "user-ada")
            issue = fake_linear.LinearIssue(new_id(), "DRY-9", "t")
            original = signing.linear(
                LINEAR_SECRET, fake_linear.comment_created(issue, f"@drydock go repo:{ORG}/{repo}")
            )
            statuses = [
                (await running.send(request)).json()["status"]
                for request in (
                    original,
                    original.with_headers(Linear_Delivery=new_id()),
                    original.with_headers(Linear_Delivery=None),
                )
            ]
            thread = ids.linear_issue(fake_linear.ORGANIZATION, issue.id)
            assert statuses == ["accepted", "duplicate", "duplicate"]
            assert len(await running.inbox(thread)) == 1
            assert await running.wakes(Role.CODER, thread) == 1

    @pytest.mark.parametrize(
        "kind",
        ["issue", "review", "review_comment", "agent_session_created", "agent_session_prompted"],
    )
    async def test_a_replay_of_each_kind_of_object_publishes_nothing(
        self, start_ingress: StartIngress, repo: str, kind: str
    ) -> None:
        async with start_ingress() as running:
            await trust(running, repo)
            await link(running, Provider.LINEAR, "user-human-1", "user-ada")
            *earlier, original = deliveries_of(kind, repo)
            for request in [*earlier, original]:
                assert (await running.send(request)).json()["status"] == "accepted"
            before = await running.stream_marks()
            header = "X_GitHub_Delivery" if "X-GitHub-Delivery" in original.headers else "Linear_Delivery"
            replay = await running.send(original.with_headers(**{header: new_id()}))
            assert replay.json()["status"] == "duplicate"
            assert await running.stream_marks() == before

    async def test_a_replay_while_the_first_is_in_flight_is_not_routed(
        self, start_ingress: StartIngress, repo: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async with start_ingress() as running:
            await trust(running, repo)
            dispatcher = running.ingress.dispatcher
            dispatch, publishing, go_on = dispatcher.dispatch, asyncio.Event(), asyncio.Event()

            async def held_once(routes: list[Route], publishes: list[Publish]) -> Any:
                if not publishing.is_set():
                    publishing.set()
                    await go_on.wait()
                return await dispatch(routes, publishes)

            monkeypatch.setattr(dispatcher, "dispatch", held_once)
            original = github_mention(repo)
            first = asyncio.create_task(running.send(original))
            await eventually(publishing.is_set, within=10, what="the first delivery publishing")
            redelivery = await running.send(original)
            replay = await running.send(original.with_headers(X_GitHub_Delivery=new_id()))
            go_on.set()
            assert (await first).json()["status"] == "accepted"
            assert redelivery.status_code == 503
            assert (replay.status_code, replay.json()["status"]) == (200, "duplicate")
            thread = ids.github_issue(HOST, ORG, repo, 1)
            assert len(await running.inbox(thread)) == 1
            assert await running.wakes(Role.CODER, thread) == 1

    async def test_an_event_without_an_identity_is_known_by_its_delivery_id_alone(
        self, start_ingress: StartIngress, repo: str
    ) -> None:
        async with start_ingress() as running:
            await trust(running, repo)
            original = signing.github(GITHUB_SECRET, "pull_request", webhooks.pull_request(ORG, repo, 4, "synchronize"))
            assert (await running.send(original)).json()["status"] == "accepted"
            assert (await running.send(original)).json()["status"] == "duplicate"
            other = new_id()
            assert (await running.send(original.with_headers(X_GitHub_Delivery=other))).json()["status"] == "accepted"
            assert await running.github_event("pull_request", other) is not None
