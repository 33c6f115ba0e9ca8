"""Input a sender or an attacker with a valid signature can send: deep nesting, ids with
whitespace, event names GitHub sends that the ingress does not route, oversized bodies. Each is
answered with a 2xx or a 4xx that says why, never a 5xx, and nothing is published for it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from drydock.channels.payload import MAX_DEPTH
from drydock.threads import ids
from tests.fakes import linear as fake_linear
from tests.fakes import signing
from tests.fakes import slack as fake_slack
from tests.fakes.github import webhooks
from tests.ingress.conftest import GITHUB_SECRET, HOST, LINEAR_SECRET, ORG, SLACK_SECRET, StartIngress, trust
from tests.ingress.test_requests import refused


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth - 1):
        value = [value] if level % 2 else {"deeper": value}
    return value


class TestNesting:
    async def test_a_payload_nested_beyond_the_limit_is_refused(self, start_ingress: StartIngress, repo: str) -> None:
        payload = webhooks.check_run(ORG, repo)
        # The payload and its check_run are the first two levels: one more than the limit in all.
        payload["check_run"]["output"] = nested(MAX_DEPTH)
        async with start_ingress() as running:
            await trust(running, repo)
            await refused(running, signing.github(GITHUB_SECRET, "check_run", payload), 400, f"{MAX_DEPTH} levels")

    async def test_a_payload_nested_far_beyond_the_limit_is_refused(
        self, start_ingress: StartIngress, repo: str
    ) -> None:
        # A forwarded event's payload is published whole: its serializer fails at this depth.
        payload = webhooks.check_run(ORG, repo)
        payload["check_run"]["output"] = nested(300)
        async with start_ingress() as running:
            await trust(running, repo)
            request = signing.github(GITHUB_SECRET, "check_run", payload)
            await refused(running, request, 400, f"{MAX_DEPTH} levels")
            form = signing.github(GITHUB_SECRET, "check_run", payload, form=True)
            await refused(running, form, 400, f"{MAX_DEPTH} levels")

    async def test_the_limit_itself_and_brackets_inside_strings_pass(
        self, start_ingress: StartIngress, repo: str
    ) -> None:
        payload = webhooks.check_run(ORG, repo)
        payload["check_run"]["output"] = {"text": "[" * 500 + '\\"{' * 300, "nested": nested(MAX_DEPTH - 2)}
        async with start_ingress() as running:
            await trust(running, repo)
            response = await running.send(signing.github(GITHUB_SECRET, "check_run", payload))
            assert response.status_code == 200, response.text


class TestIds:
    async def test_a_github_sender_id_with_whitespace(self, start_ingress: StartIngress, repo: str) -> None:
        author = webhooks.user("octocat")
        author["id"] = "12 34"
        payload = webhooks.issue_comment(ORG, repo, 1, "@drydock hi", author=author)
        async with start_ingress() as running:
            await trust(running, repo)
            await refused(running, signing.github(GITHUB_SECRET, "issue_comment", payload), 400, "'comment.user.id'")

    async def test_a_slack_user_with_whitespace(self, start_ingress: StartIngress) -> None:
        payload = fake_slack.app_mention("C0CHAN", "1712345678.000100", "<@U0DRYDOCK> hi", user="U0 HUMAN")
        async with start_ingress(slack={"bot_user_id": "U0DRYDOCK"}) as running:
            await refused(running, signing.slack_event(SLACK_SECRET, payload), 400, "'event.user'")

    async def test_a_slack_timestamp_ending_in_a_newline(self, start_ingress: StartIngress) -> None:
        payload = fake_slack.app_mention("C0CHAN", "1712345678.000100\n", "<@U0DRYDOCK> hi")
        async with start_ingress(slack={"bot_user_id": "U0DRYDOCK"}) as running:
            await refused(running, signing.slack_event(SLACK_SECRET, payload), 400, "'ts' is not a Slack timestamp")

    async def test_a_linear_user_with_whitespace(self, start_ingress: StartIngress) -> None:
        issue = fake_linear.LinearIssue("issue-1", "DRY-1", "Title")
        payload = fake_linear.comment_created(issue, "@drydock hi", user_id="user 1")
        async with start_ingress() as running:
            await refused(running, signing.linear(LINEAR_SECRET, payload), 400, "'data.userId'")


REPOSITORY_EVENTS: dict[str, Callable[[str], dict[str, Any]]] = {
    "issue_comment": lambda repo: webhooks.issue_comment(ORG, repo, 1, "@drydock hi"),
    "issues": lambda repo: webhooks.issues_opened(ORG, repo, 2, "title", "@drydock hi"),
    "pull_request": lambda repo: webhooks.pull_request(ORG, repo, 3, "opened"),
    "pull_request_review_comment": lambda repo: webhooks.review_comment(ORG, repo, 3, "@drydock hi"),
}


class TestRepositoryNames:
    @pytest.mark.parametrize("event", list(REPOSITORY_EVENTS))
    @pytest.mark.parametrize(
        ("owner", "name"), [("..", None), (".", None), (None, "."), (None, ".."), (ORG + "\n", None)]
    )
    async def test_a_name_that_is_no_repository_is_refused(
        self, start_ingress: StartIngress, repo: str, event: str, owner: str | None, name: str | None
    ) -> None:
        payload = REPOSITORY_EVENTS[event](repo)
        if owner is not None:
            payload["repository"]["owner"]["login"] = owner
        if name is not None:
            payload["repository"]["name"] = name
        async with start_ingress() as running:
            await trust(running, repo)
            await refused(running, signing.github(GITHUB_SECRET, event, payload), 400, "not a GitHub name")


class TestEventNames:
    async def test_events_with_digits_are_ignored_not_refused(self, start_ingress: StartIngress, repo: str) -> None:
        payload: dict[str, Any] = {"action": "created", "projects_v2_item": {"id": 1}, "sender": webhooks.user("a")}
        async with start_ingress() as running:
            for event in ("projects_v2_item", "projects_v2", "projects_v2_status_update", "security_and_analysis"):
                response = await running.send(signing.github(GITHUB_SECRET, event, payload))
                assert response.status_code == 200, (event, response.text)
                assert response.json()["status"] == "ignored"

    async def test_a_header_that_is_no_event_name_is_refused(self, start_ingress: StartIngress) -> None:
        async with start_ingress() as running:
            request = signing.github(GITHUB_SECRET, "ping", webhooks.ping())
            await refused(running, request.with_headers(X_GitHub_Event="Issue Comment"), 400, "X-GitHub-Event")


class TestBodyLimit:
    def test_the_default_admits_githubs_largest_payloads(self) -> None:
        from drydock.config import IngressSettings

        assert IngressSettings().max_body_bytes >= 25 * 1024 * 1024

    async def test_a_20_mb_push_is_accepted_with_the_default_limit(
        self, start_ingress: StartIngress, repo: str
    ) -> None:
        payload = webhooks.push(ORG, repo, "main")
        commit = {"id": "a" * 40, "message": "a long commit message\n" * 200, "added": ["src/module.py"] * 50}
        payload["commits"] = [commit] * 4000
        request = signing.github(GITHUB_SECRET, "push", payload)
        assert len(request.body) > 20_000_000
        async with start_ingress() as running:
            response = await running.client.post(
                request.path, content=request.body, headers=request.headers, timeout=60
            )
            assert response.status_code == 200, response.text

    async def test_an_event_larger_than_nats_accepts_is_a_413(self, start_ingress: StartIngress, repo: str) -> None:
        payload = webhooks.check_run(ORG, repo)
        payload["check_run"]["output"] = {"text": "a line of a long build log\n" * 100_000}
        async with start_ingress() as running:
            await trust(running, repo)
            limit = running.bus.nc.max_payload
            assert len(json.dumps(payload)) > limit
            request = signing.github(GITHUB_SECRET, "check_run", payload)
            before = await running.stream_marks()
            response = await running.send(request)
            assert response.status_code == 413, response.text
            assert response.json()["limit_bytes"] == limit
            assert await running.stream_marks() == before
            # Refused for good: the retry is refused the same way, not taken for a duplicate.
            assert (await running.send(request)).status_code == 413

    async def test_a_delivery_with_one_message_too_large_writes_nothing(
        self, start_ingress: StartIngress, repo: str
    ) -> None:
        async with start_ingress() as running:
            await trust(running, repo, reviewer=True)
            limit = running.bus.nc.max_payload
            # The review request is small and would create the reviewer's thread; the forwarded
            # event carries the body and is too large.
            payload = webhooks.pull_request(ORG, repo, 7, "opened")
            payload["pull_request"]["body"] = "x" * (limit + 1000)
            before = await running.stream_marks()
            response = await running.send(signing.github(GITHUB_SECRET, "pull_request", payload))
            assert response.status_code == 413, response.text
            assert response.json()["limit_bytes"] == limit
            assert await running.stream_marks() == before
            assert await running.metadata.find(ids.reviewer(HOST, ORG, repo, 7)) is None

    async def test_a_413_says_the_limit(self, start_ingress: StartIngress, repo: str) -> None:
        payload = webhooks.issue_comment(ORG, repo, 1, "@drydock " + "x" * 4096)
        async with start_ingress(ingress={"max_body_bytes": 2048}) as running:
            response = await running.send(signing.github(GITHUB_SECRET, "issue_comment", payload))
            assert response.status_code == 413
            assert response.headers["content-type"] == "application/json"
            assert response.json() == {"error": "body larger than 2048 bytes", "limit_bytes": 2048}
