"""Requests the ingress refuses before routing: malformed bodies, wrong content types, bodies
above the limit, missing delivery headers, channels without a secret. Each gets its 4xx, a log
line with the reason, and nothing is published."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from urllib.parse import urlencode

from structlog.testing import capture_logs

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
    trust,
)


def github_raw(body: bytes, content_type: str = "application/json") -> signing.SignedRequest:
    return signing.github_raw(GITHUB_SECRET, "issue_comment", body, content_type=content_type)


async def refused(running: RunningIngress, request: signing.SignedRequest, status: int, reason_part: str) -> None:
    before = await running.stream_marks()
    with capture_logs() as logs:
        response = await running.send(request)
    assert response.status_code == status, response.text
    assert reason_part in response.json()["error"]
    assert await running.stream_marks() == before
    assert any(entry["event"] == "webhook rejected" and reason_part in entry["reason"] for entry in logs)


class TestMalformed:
    async def test_a_body_that_is_not_json(self, start_ingress: StartIngress) -> None:
        async with start_ingress() as running:
            await refused(running, github_raw(b'{"action": "created",'), 400, "not valid JSON")

    async def test_json_that_is_not_an_object(self, start_ingress: StartIngress) -> None:
        async with start_ingress() as running:
            await refused(running, github_raw(b"[1, 2, 3]"), 400, "not a JSON object")

    async def test_a_payload_missing_what_the_event_needs(self, start_ingress: StartIngress) -> None:
        async with start_ingress() as running:
            await refused(running, github_raw(json.dumps({"action": "created"}).encode()), 400, "'repository'")

    async def test_deeply_nested_json(self, start_ingress: StartIngress) -> None:
        async with start_ingress() as running:
            await refused(running, github_raw(b"[" * 100_000 + b"]" * 100_000), 400, "not valid JSON")

    async def test_a_wrong_content_type(self, start_ingress: StartIngress, repo: str) -> None:
        payload = json.dumps(webhooks.issue_comment(ORG, repo, 1, "@drydock hi")).encode()
        async with start_ingress() as running:
            await refused(running, github_raw(payload, "text/plain"), 400, "content type")

    async def test_slack_events_must_be_json_and_interactions_forms(self, start_ingress: StartIngress) -> None:
        form = urlencode({"payload": json.dumps(fake_slack.url_verification("c"))}).encode()
        as_json = json.dumps(fake_slack.url_verification("c")).encode()
        async with start_ingress() as running:
            events = signing.slack_raw(
                SLACK_SECRET, signing.SLACK_EVENTS_PATH, form, "application/x-www-form-urlencoded"
            )
            await refused(running, events, 400, "must be application/json")
            interactivity = signing.slack_raw(
                SLACK_SECRET, signing.SLACK_INTERACTIVITY_PATH, as_json, "application/json"
            )
            await refused(running, interactivity, 400, "must be application/x-www-form-urlencoded")

    async def test_a_missing_delivery_header(self, start_ingress: StartIngress, repo: str) -> None:
        request = signing.github(GITHUB_SECRET, "issue_comment", webhooks.issue_comment(ORG, repo, 1, "@drydock"))
        async with start_ingress() as running:
            await refused(running, request.with_headers(X_GitHub_Delivery=None), 400, "X-GitHub-Delivery")
            await refused(running, request.with_headers(X_GitHub_Delivery="a\tb"), 400, "not a delivery id")

    async def test_a_linear_body_without_its_signed_timestamp(self, start_ingress: StartIngress) -> None:
        payload = fake_linear.issue_created(fake_linear.LinearIssue("issue-1", "DRY-1", "t"))
        async with start_ingress() as running:
            await refused(
                running, signing.linear_raw(LINEAR_SECRET, json.dumps(payload).encode()), 401, "webhookTimestamp"
            )

    async def test_a_linear_body_that_is_not_json(self, start_ingress: StartIngress) -> None:
        async with start_ingress() as running:
            await refused(running, signing.linear_raw(LINEAR_SECRET, b"webhookTimestamp=1"), 400, "not valid JSON")


class TestLimits:
    async def test_a_declared_body_above_the_limit(self, start_ingress: StartIngress, repo: str) -> None:
        payload = webhooks.issue_comment(ORG, repo, 1, "@drydock " + "x" * 4096)
        async with start_ingress(ingress={"max_body_bytes": 2048}) as running:
            await trust(running, repo)
            await refused(running, signing.github(GITHUB_SECRET, "issue_comment", payload), 413, "larger than 2048")

    async def test_a_streamed_body_above_the_limit(self, start_ingress: StartIngress, repo: str) -> None:
        request = signing.github(GITHUB_SECRET, "issue_comment", webhooks.issue_comment(ORG, repo, 1, "x" * 8192))

        async def chunks() -> AsyncIterator[bytes]:
            for start in range(0, len(request.body), 1024):
                yield request.body[start : start + 1024]

        async with start_ingress(ingress={"max_body_bytes": 2048}) as running:
            before = await running.stream_marks()
            response = await running.client.post(request.path, content=chunks(), headers=request.headers)
            assert response.status_code == 413
            assert await running.stream_marks() == before

    async def test_a_body_at_the_limit_is_read(self, start_ingress: StartIngress, repo: str) -> None:
        request = signing.github(GITHUB_SECRET, "issue_comment", webhooks.issue_comment(ORG, repo, 1, "@drydock go"))
        async with start_ingress(ingress={"max_body_bytes": len(request.body)}) as running:
            await trust(running, repo)
            assert (await running.send(request)).status_code == 200
            assert len(await running.inbox(ids.github_issue(HOST, ORG, repo, 1))) == 1


class TestConfiguration:
    async def test_a_channel_without_a_secret_is_not_served(self, start_ingress: StartIngress) -> None:
        async with start_ingress(github={"webhook_secret": None}) as running:
            request = signing.github(GITHUB_SECRET, "ping", webhooks.ping())
            await refused(running, request, 404, "DRYDOCK_GITHUB_WEBHOOK_SECRET")

    async def test_github_form_deliveries_are_accepted(self, start_ingress: StartIngress, repo: str) -> None:
        payload = webhooks.issue_comment(ORG, repo, 2, "@drydock from a form")
        async with start_ingress() as running:
            await trust(running, repo)
            response = await running.send(signing.github(GITHUB_SECRET, "issue_comment", payload, form=True))
            assert response.status_code == 200
            (message,) = await running.inbox(ids.github_issue(HOST, ORG, repo, 2))
            assert message.text == "@drydock from a form"
