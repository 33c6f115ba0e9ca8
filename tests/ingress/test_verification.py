"""Verification at the real endpoints, written once and run for each channel: a valid
signature is accepted and published; a wrong secret, a tampered body, a missing header or a
stale timestamp is refused with 401, a log line that says why, and nothing published."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest
from structlog.testing import capture_logs

from drydock.accounts import Provider
from drydock.threads import ids
from tests.fakes import linear as fake_linear
from tests.fakes import signing
from tests.fakes import slack as fake_slack
from tests.fakes.github import webhooks
from tests.ingress.conftest import (
    GITHUB_SECRET,
    HOST,
    LINEAR_SECRET,
    ORG,
    SLACK_SECRET,
    RunningIngress,
    StartIngress,
    link,
    trust,
)


@dataclass(frozen=True)
class Delivery:
    request: signing.SignedRequest
    thread_id: str


@dataclass(frozen=True)
class ChannelCase:
    name: str
    signature_header: str
    arrange: Callable[[RunningIngress, str], Awaitable[None]]
    valid: Callable[[str, str], Delivery]
    """``(secret, repo)`` → a correctly signed delivery that starts a thread."""
    stale: Callable[[str, str], signing.SignedRequest] | None


async def _arrange_github(running: RunningIngress, repo: str) -> None:
    await trust(running, repo)


def _github(secret: str, repo: str) -> Delivery:
    payload = webhooks.issue_comment(ORG, repo, 7, "@drydock please fix the flaky test")
    return Delivery(signing.github(secret, "issue_comment", payload), ids.github_issue(HOST, ORG, repo, 7))


async def _arrange_slack(running: RunningIngress, repo: str) -> None:
    await trust(running, repo)
    await link(running, Provider.SLACK, "U0HUMAN")


def _slack_payload(repo: str) -> tuple[dict[str, object], str]:
    ts = f"{int(time.time())}.{uuid.uuid4().int % 1_000_000:06d}"
    text = f"<@{fake_slack.BOT_USER}> please fix it repo:{ORG}/{repo}"
    return fake_slack.app_mention("C0GENERAL", ts, text), ts


def _slack(secret: str, repo: str) -> Delivery:
    payload, ts = _slack_payload(repo)
    return Delivery(signing.slack_event(secret, payload), ids.slack_thread(fake_slack.TEAM, "C0GENERAL", ts))


def _slack_stale(secret: str, repo: str) -> signing.SignedRequest:
    payload, _ = _slack_payload(repo)
    return signing.slack_event(secret, payload, timestamp=int(time.time()) - 301)


async def _arrange_linear(running: RunningIngress, repo: str) -> None:
    await trust(running, repo)
    await link(running, Provider.LINEAR, "user-human-1")


def _linear_issue() -> fake_linear.LinearIssue:
    return fake_linear.LinearIssue(str(uuid.uuid4()), "DRY-1", "Fix the login page")


def _linear(secret: str, repo: str) -> Delivery:
    issue = _linear_issue()
    payload = fake_linear.comment_created(issue, f"@drydock take this one repo:{ORG}/{repo}")
    return Delivery(signing.linear(secret, payload), ids.linear_issue(fake_linear.ORGANIZATION, issue.id))


def _linear_stale(secret: str, repo: str) -> signing.SignedRequest:
    payload = fake_linear.comment_created(_linear_issue(), f"@drydock take this one repo:{ORG}/{repo}")
    return signing.linear(secret, payload, timestamp_ms=fake_linear.now_ms() - 61_000)


CASES = {
    "github": (ChannelCase("github", "X-Hub-Signature-256", _arrange_github, _github, None), GITHUB_SECRET),
    "slack": (ChannelCase("slack", "X-Slack-Signature", _arrange_slack, _slack, _slack_stale), SLACK_SECRET),
    "linear": (ChannelCase("linear", "Linear-Signature", _arrange_linear, _linear, _linear_stale), LINEAR_SECRET),
}


@pytest.fixture(params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> tuple[ChannelCase, str]:
    return CASES[request.param]


class TestVerification:
    async def test_valid_signature_is_accepted_and_published(
        self, start_ingress: StartIngress, repo: str, case: tuple[ChannelCase, str]
    ) -> None:
        channel, secret = case
        async with start_ingress() as running:
            await channel.arrange(running, repo)
            delivery = channel.valid(secret, repo)
            response = await running.send(delivery.request)
            assert response.status_code == 200, response.text
            assert response.json()["status"] == "accepted"
            inbox = await running.inbox(delivery.thread_id)
            assert [message.delivery_id for message in inbox] == [delivery.request.delivery_id]

    async def _refused(self, running: RunningIngress, request: signing.SignedRequest, reason_part: str) -> None:
        before = await running.stream_marks()
        with capture_logs() as logs:
            response = await running.send(request)
        assert response.status_code == 401
        assert reason_part in response.json()["error"]
        assert await running.stream_marks() == before
        rejected = [entry for entry in logs if entry["event"] == "webhook rejected"]
        assert len(rejected) == 1
        assert reason_part in rejected[0]["reason"]
        assert rejected[0]["status"] == 401

    async def test_wrong_secret_is_refused(
        self, start_ingress: StartIngress, repo: str, case: tuple[ChannelCase, str]
    ) -> None:
        channel, _ = case
        async with start_ingress() as running:
            await channel.arrange(running, repo)
            await self._refused(running, channel.valid("not-the-secret", repo).request, "does not match")

    async def test_tampered_body_is_refused(
        self, start_ingress: StartIngress, repo: str, case: tuple[ChannelCase, str]
    ) -> None:
        channel, secret = case
        async with start_ingress() as running:
            await channel.arrange(running, repo)
            request = channel.valid(secret, repo).request
            tampered = request.with_body(request.body.replace(b"please", b"delete", 1).replace(b"take", b"drop", 1))
            assert tampered.body != request.body
            await self._refused(running, tampered, "does not match")

    async def test_missing_signature_header_is_refused(
        self, start_ingress: StartIngress, repo: str, case: tuple[ChannelCase, str]
    ) -> None:
        channel, secret = case
        async with start_ingress() as running:
            await channel.arrange(running, repo)
            request = channel.valid(secret, repo).request
            unsigned = request.with_headers(**{channel.signature_header.replace("-", "_"): None})
            await self._refused(running, unsigned, "missing")

    async def test_stale_timestamp_is_refused(
        self, start_ingress: StartIngress, repo: str, case: tuple[ChannelCase, str]
    ) -> None:
        channel, secret = case
        if channel.stale is None:
            pytest.skip("GitHub deliveries carry no signed timestamp")
        async with start_ingress() as running:
            await channel.arrange(running, repo)
            await self._refused(running, channel.stale(secret, repo), "replay window")

    async def test_a_redelivery_is_published_once(
        self, start_ingress: StartIngress, repo: str, case: tuple[ChannelCase, str]
    ) -> None:
        channel, secret = case
        async with start_ingress() as running:
            await channel.arrange(running, repo)
            delivery = channel.valid(secret, repo)
            first = await running.send(delivery.request)
            marks = await running.stream_marks()
            second = await running.send(delivery.request)
            assert first.status_code == second.status_code == 200
            assert second.json()["status"] == "duplicate"
            assert await running.stream_marks() == marks
            assert len(await running.inbox(delivery.thread_id)) == 1
