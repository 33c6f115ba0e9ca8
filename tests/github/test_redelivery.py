"""Failed webhook deliveries asked for again: the fake GitHub sends the App's webhook to a
receiver whose answers a test sets, records each attempt as GitHub does, and redelivers when
asked; the sweep keeps its marks and counts in the real Valkey."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import pytest
import structlog
from fastapi import FastAPI, Request, Response
from redis.asyncio import Redis

from drydock.channels.github.given_up import KEPT_BY_GITHUB, GivenUpDeliveries, GivenUpDelivery
from drydock.channels.github.redelivery import OVERLAP, Redeliveries
from drydock.errors import OutboundFailed
from drydock.github import GithubClient
from drydock.github.hook_deliveries import HookDelivery
from drydock.infra.redis import Keys
from drydock.telemetry import REGISTRY
from tests.fakes.github import FakeGithub
from tests.fakes.github import webhooks as payloads
from tests.fakes.github.hook_deliveries import delivery_json
from tests.fakes.github.state import App, Installation
from tests.fakes.loopback import LoopbackServer
from tests.github.conftest import ORG, settings_for

SECRET = "redelivery-secret"
INTERVAL = timedelta(minutes=1)


@dataclass
class Receiver:
    """Answers each delivery with the next of ``answers`` (the last one repeats)."""

    answers: list[int]
    seen: list[tuple[str, bytes]] = field(default_factory=list)
    holding: asyncio.Event | None = None
    """While set and not yet set free, no answer: GitHub has not carried out an attempt until it ends."""

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/webhooks/github")
        async def receive(request: Request) -> Response:
            if self.holding is not None:
                await self.holding.wait()
            self.seen.append((request.headers["x-github-delivery"], await request.body()))
            status = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
            return Response(status_code=status)

        return app


@pytest.fixture
async def receiver(github: FakeGithub, app: App, installation: Installation) -> AsyncIterator[Receiver]:
    receiving = Receiver([200])
    async with LoopbackServer(receiving.app()) as server:
        github.configure_webhook(app, f"{server.base_url}/webhooks/github", SECRET)
        yield receiving
        # A request held by a failed test would hold the server's shutdown.
        if receiving.holding is not None:
            receiving.holding.set()


@pytest.fixture
def keys() -> Keys:
    return Keys(prefix=f"test-redelivery-{uuid.uuid4().hex[:8]}")


def redeliveries(
    client: GithubClient, redis: Redis, keys: Keys, api_url: str, app: App, attempts: int = 3
) -> Redeliveries:
    settings = settings_for(app, api_url).model_copy(
        update={"redeliver_attempts": attempts, "redeliver_interval": INTERVAL}
    )
    return Redeliveries(client, redis, keys, settings)


async def deliver(github: FakeGithub, app: App) -> str:
    payload = payloads.issue_comment(ORG, "widgets", 7, "@drydock please fix")
    return (await github.deliver_webhook(app, "issue_comment", payload)).guid


def asked_total() -> float:
    return REGISTRY.get_sample_value("drydock_github_redeliveries_total", {"outcome": "asked"}) or 0.0


def later(by: timedelta) -> datetime:
    return datetime.now(UTC) + by


class TestRedeliveries:
    async def test_a_delivery_answered_503_is_asked_for_again_and_arrives_with_its_guid_and_body(
        self, github: FakeGithub, app: App, client: GithubClient, receiver: Receiver, redis: Redis, keys: Keys
    ) -> None:
        receiver.answers = [503, 200]
        guid = await deliver(github, app)
        sweeper = redeliveries(client, redis, keys, github.base_url, app)

        asked_before = asked_total()
        swept = await sweeper.sweep(later(INTERVAL))
        await github.redeliveries_settled()

        assert swept.asked == [guid]
        assert asked_total() == asked_before + 1
        assert [seen_guid for seen_guid, _ in receiver.seen] == [guid, guid]
        assert receiver.seen[0][1] == receiver.seen[1][1]
        attempts = github.webhook_deliveries(guid)
        assert sorted((attempt.redelivery, attempt.status_code) for attempt in attempts) == [(False, 503), (True, 200)]
        again = await sweeper.sweep(later(INTERVAL * 10))
        assert (again.asked, again.waiting, again.given_up) == ([], [], [])

    @pytest.mark.parametrize("status", [200, 202, 400, 401, 404, 413])
    async def test_a_success_or_a_refusal_of_the_payload_itself_is_not_asked_for(
        self,
        github: FakeGithub,
        app: App,
        client: GithubClient,
        receiver: Receiver,
        redis: Redis,
        keys: Keys,
        status: int,
    ) -> None:
        receiver.answers = [status]
        await deliver(github, app)
        swept = await redeliveries(client, redis, keys, github.base_url, app).sweep(later(INTERVAL * 10))
        assert (swept.asked, swept.waiting) == ([], [])
        assert len(receiver.seen) == 1

    async def test_no_answer_at_all_is_asked_for_again(
        self, github: FakeGithub, app: App, client: GithubClient, receiver: Receiver, redis: Redis, keys: Keys
    ) -> None:
        async with LoopbackServer(FastAPI()) as gone:
            unreachable = gone.base_url
        github.configure_webhook(app, f"{unreachable}/webhooks/github", SECRET)
        guid = await deliver(github, app)
        assert [attempt.status_code for attempt in github.webhook_deliveries(guid)] == [0]
        swept = await redeliveries(client, redis, keys, github.base_url, app).sweep(later(INTERVAL))
        assert swept.asked == [guid]

    async def test_what_the_ingress_made_durable_or_holds_is_not_asked_for(
        self, github: FakeGithub, app: App, client: GithubClient, receiver: Receiver, redis: Redis, keys: Keys
    ) -> None:
        # GitHub gave up waiting while the ingress finished: its de-duplication key says done.
        receiver.answers = [504]
        done = await deliver(github, app)
        held = await deliver(github, app)
        await redis.set(keys.delivery("github", done), "done")
        await redis.set(keys.delivery("github", held), "pending")

        swept = await redeliveries(client, redis, keys, github.base_url, app).sweep(later(INTERVAL))

        assert swept.asked == []
        assert swept.waiting == [held]
        assert len(receiver.seen) == 2

    async def test_pauses_double_and_a_delivery_that_keeps_failing_is_reported_once(
        self, github: FakeGithub, app: App, client: GithubClient, receiver: Receiver, redis: Redis, keys: Keys
    ) -> None:
        receiver.answers = [503]
        guid = await deliver(github, app)
        sweeper = redeliveries(client, redis, keys, github.base_url, app, attempts=2)
        first = github.webhook_deliveries(guid)[0].delivered_at

        assert (await sweeper.sweep(first + INTERVAL / 2)).waiting == [guid]
        assert float(await redis.get(keys.redeliveries_swept()) or 0) == first.timestamp()
        asked_at = first + INTERVAL
        assert (await sweeper.sweep(asked_at)).asked == [guid]
        await github.redeliveries_settled()
        # Asked once: the next ask waits twice the interval after the failed redelivery, or after
        # the ask when that is later (as here, the sweep running ahead of GitHub's clock).
        assert (await sweeper.sweep(asked_at + INTERVAL)).waiting == [guid]
        assert (await sweeper.sweep(asked_at + 2 * INTERVAL)).asked == [guid]
        await github.redeliveries_settled()
        # The sweeps above ran at times ahead of GitHub's clock, and so did their mark.
        await redis.delete(keys.redeliveries_swept())

        with structlog.testing.capture_logs() as logs:
            final = await sweeper.sweep(later(timedelta(hours=2)))
            after = await sweeper.sweep(later(timedelta(hours=3)))
        assert final.given_up == [guid]
        assert (after.asked, after.waiting, after.given_up) == ([], [], [])
        reported = [entry for entry in logs if entry["log_level"] == "error"]
        assert [(entry["guid"], entry["redeliveries"]) for entry in reported] == [(guid, 2)]
        assert len(receiver.seen) == 3

    async def test_an_ask_github_has_not_carried_out_is_not_made_again_before_its_pause(
        self, github: FakeGithub, app: App, client: GithubClient, receiver: Receiver, redis: Redis, keys: Keys
    ) -> None:
        receiver.answers = [503]
        guid = await deliver(github, app)
        sweeper = redeliveries(client, redis, keys, github.base_url, app)
        failed_at = github.webhook_deliveries(guid)[0].delivered_at
        receiver.holding = asyncio.Event()

        # An hour after the failure (the controller was away), every pause has passed since it.
        asked_at = failed_at + timedelta(hours=1)
        assert (await sweeper.sweep(asked_at)).asked == [guid]
        assert (await sweeper.sweep(asked_at + INTERVAL)).waiting == [guid]
        assert (await sweeper.sweep(asked_at + 2 * INTERVAL)).asked == [guid]
        receiver.holding.set()
        await github.redeliveries_settled()
        assert [attempt.redelivery for attempt in github.webhook_deliveries(guid)].count(True) == 2

    async def test_a_sweep_reads_back_only_to_the_mark_less_the_overlap(
        self, github: FakeGithub, app: App, client: GithubClient, receiver: Receiver, redis: Redis, keys: Keys
    ) -> None:
        receiver.answers = [503]
        guid = await deliver(github, app)
        failed_at = github.webhook_deliveries(guid)[0].delivered_at
        sweeper = redeliveries(client, redis, keys, github.base_url, app)

        await redis.set(keys.redeliveries_swept(), (failed_at + OVERLAP + timedelta(seconds=2)).timestamp())
        assert (await sweeper.sweep(failed_at + 10 * INTERVAL)).asked == []
        await redis.set(keys.redeliveries_swept(), (failed_at + OVERLAP).timestamp())
        assert (await sweeper.sweep(failed_at + 10 * INTERVAL)).asked == [guid]


async def given_up(github: FakeGithub, app: App, sweeper: Redeliveries, redis: Redis, keys: Keys) -> str:
    """A delivery that failed, was asked for once, failed again and was given up."""
    guid = await deliver(github, app)
    assert (await sweeper.sweep(later(INTERVAL))).asked == [guid]
    await github.redeliveries_settled()
    # The sweeps here run at times ahead of GitHub's clock, and so do their marks.
    await redis.delete(keys.redeliveries_swept())
    assert (await sweeper.sweep(later(timedelta(hours=2)))).given_up == [guid]
    await redis.delete(keys.redeliveries_swept())
    return guid


@dataclass
class StillFailing:
    sweeper: Redeliveries
    records: GivenUpDeliveries
    record: GivenUpDelivery


@pytest.fixture
async def still_failing(
    github: FakeGithub, app: App, client: GithubClient, receiver: Receiver, redis: Redis, keys: Keys
) -> StillFailing:
    """A delivery given up after one redelivery, whose webhook still answers 503."""
    receiver.answers = [503]
    sweeper = redeliveries(client, redis, keys, github.base_url, app, attempts=1)
    await given_up(github, app, sweeper, redis, keys)
    records = GivenUpDeliveries(redis, keys)
    [record] = await records.all()
    return StillFailing(sweeper, records, record)


class TestGivenUp:
    async def test_a_delivery_given_up_is_kept_for_administrators_with_its_last_attempt(
        self, github: FakeGithub, app: App, client: GithubClient, receiver: Receiver, redis: Redis, keys: Keys
    ) -> None:
        receiver.answers = [503, 502]
        guid = await given_up(
            github, app, redeliveries(client, redis, keys, github.base_url, app, attempts=1), redis, keys
        )

        [record] = await GivenUpDeliveries(redis, keys).all()

        [last] = [attempt for attempt in github.webhook_deliveries(guid) if attempt.redelivery]
        payload = json.loads(last.body)
        assert (record.guid, record.id, record.event, record.action, record.status_code, record.redeliveries) == (
            guid, last.id, "issue_comment", "created", 502, 1,
        )  # fmt: skip
        assert record.repository_id == last.repository_id is not None
        assert (record.repository, record.url) == (
            f"{ORG}/widgets",
            f"https://github.com/{ORG}/widgets/issues/7#issuecomment-{payload['comment']['id']}",
        )

    async def test_asked_for_again_it_arrives_and_the_sweep_may_ask_for_it_again_as_new(
        self, github: FakeGithub, client: GithubClient, receiver: Receiver, still_failing: StillFailing
    ) -> None:
        records, record = still_failing.records, still_failing.record
        await records.redeliver(record, client)
        await github.redeliveries_settled()

        assert [seen_guid for seen_guid, _ in receiver.seen] == [record.guid] * 3
        assert await records.all() == []
        assert (await still_failing.sweeper.sweep(later(timedelta(hours=3)))).asked == [record.guid]

    async def test_the_sweep_waits_its_pause_after_an_administrator_asked(
        self, github: FakeGithub, client: GithubClient, receiver: Receiver, still_failing: StillFailing
    ) -> None:
        receiver.holding = asyncio.Event()
        asked_at = later(timedelta(hours=3))
        await still_failing.records.redeliver(still_failing.record, client, now=asked_at)
        assert (await still_failing.sweeper.sweep(asked_at + INTERVAL / 2)).waiting == [still_failing.record.guid]
        assert (await still_failing.sweeper.sweep(asked_at + INTERVAL)).asked == [still_failing.record.guid]
        receiver.holding.set()
        await github.redeliveries_settled()

    async def test_a_record_github_no_longer_keeps_is_dropped_when_read(
        self, github: FakeGithub, app: App, client: GithubClient, receiver: Receiver, redis: Redis, keys: Keys
    ) -> None:
        receiver.answers = [503]
        await given_up(github, app, redeliveries(client, redis, keys, github.base_url, app, attempts=1), redis, keys)
        records = GivenUpDeliveries(redis, keys)
        [record] = await records.all()
        last_attempt = datetime.fromisoformat(record.delivered_at)

        assert await records.all(now=last_attempt + KEPT_BY_GITHUB - timedelta(minutes=1)) == [record]
        assert await records.all(now=last_attempt + KEPT_BY_GITHUB + timedelta(minutes=1)) == []
        assert await records.all() == []

    async def test_recording_one_drops_those_github_no_longer_keeps_unread(
        self, github: FakeGithub, app: App, client: GithubClient, receiver: Receiver, redis: Redis, keys: Keys
    ) -> None:
        receiver.answers = [503]
        sweeper = redeliveries(client, redis, keys, github.base_url, app, attempts=1)
        old = await given_up(github, app, sweeper, redis, keys)
        [record] = await GivenUpDeliveries(redis, keys).all()
        four_days_ago = (datetime.fromisoformat(record.delivered_at) - timedelta(days=4)).isoformat()
        await redis.hset(keys.deliveries_given_up(), old, replace(record, delivered_at=four_days_ago).to_json())

        new = await given_up(github, app, sweeper, redis, keys)

        assert await redis.hkeys(keys.deliveries_given_up()) == [new]

    async def test_only_a_web_address_is_kept_as_the_page_to_link(
        self, github: FakeGithub, app: App, receiver: Receiver, redis: Redis, keys: Keys
    ) -> None:
        receiver.answers = [503]
        payload = payloads.issue_comment(ORG, "widgets", 7, "@drydock please fix")
        payload["comment"]["html_url"] = "javascript:alert(document.cookie)"
        attempt = await github.deliver_webhook(app, "issue_comment", payload)
        records = GivenUpDeliveries(redis, keys)

        await records.record(HookDelivery.of(delivery_json(attempt)), 8, at=datetime.now(UTC), payload=payload)

        [record] = await records.all()
        assert record.url == f"https://github.com/{ORG}/widgets/issues/7"


class TestDeliveredPayload:
    async def test_an_attempt_shows_the_payload_github_sent(
        self, github: FakeGithub, app: App, client: GithubClient, receiver: Receiver
    ) -> None:
        guid = await deliver(github, app)
        [attempt] = github.webhook_deliveries(guid)

        assert await client.delivered_payload(attempt.id) == json.loads(attempt.body)

    async def test_an_attempt_github_does_not_keep_is_an_outbound_failure_with_its_status(
        self, client: GithubClient, receiver: Receiver
    ) -> None:
        with pytest.raises(OutboundFailed) as raised:
            await client.delivered_payload(987654321)

        assert raised.value.status == 404
