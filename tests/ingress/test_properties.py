"""Property tests at the real endpoints: no body, header set or event type yields a 5xx.

Hypothesis drives the examples from a worker thread; each request is sent by the test's
async client on the test's event loop (which also serves the ingress), so the whole path runs:
body limit, verification, parsing, routing against Valkey, and publishing to NATS.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drydock.channels.payload import MAX_DEPTH
from tests.channels.test_parse_properties import mutated, paths
from tests.fakes import linear as fake_linear
from tests.fakes import signing
from tests.fakes import slack as fake_slack
from tests.fakes.github import webhooks
from tests.ingress.conftest import GITHUB_SECRET, LINEAR_SECRET, ORG, SLACK_SECRET, StartIngress, trust

EXAMPLES = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))

PATHS = [signing.GITHUB_PATH, signing.SLACK_EVENTS_PATH, signing.SLACK_INTERACTIVITY_PATH, signing.LINEAR_PATH]
HEADER_NAMES = [
    "Content-Type",
    "Content-Length",
    "X-GitHub-Event",
    "X-GitHub-Delivery",
    "X-Hub-Signature-256",
    "X-Slack-Signature",
    "X-Slack-Request-Timestamp",
    "X-Slack-Retry-Num",
    "Linear-Signature",
    "Linear-Delivery",
]
header_values = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60).map(str.strip)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=10,
)


class Sender:
    """Sends requests on the loop that serves the ingress, from Hypothesis's thread."""

    def __init__(self, client: httpx.AsyncClient, loop: asyncio.AbstractEventLoop) -> None:
        self._client = client
        self._loop = loop

    def _run(self, call: Coroutine[Any, Any, httpx.Response]) -> httpx.Response:
        return asyncio.run_coroutine_threadsafe(call, self._loop).result(timeout=30)

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
        return self._run(self._client.post(path, content=body, headers=headers))

    def send(self, request: signing.SignedRequest) -> httpx.Response:
        return self.post(request.path, request.body, request.headers)


def no_server_error(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text)
    assert isinstance(response.json(), dict)


class TestNoServerErrors:
    async def test_unsigned_arbitrary_requests(self, start_ingress: StartIngress) -> None:
        async with start_ingress() as running:
            sender = Sender(running.client, asyncio.get_running_loop())

            @EXAMPLES
            @given(
                st.sampled_from(PATHS),
                st.binary(max_size=300),
                st.dictionaries(st.sampled_from(HEADER_NAMES), header_values, max_size=6),
            )
            def check(path: str, body: bytes, headers: dict[str, str]) -> None:
                headers.pop("Content-Length", None)
                no_server_error(sender.post(path, body, headers))

            await asyncio.to_thread(check)

    async def test_signed_arbitrary_bodies_and_events(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await trust(running, repo)
            sender = Sender(running.client, asyncio.get_running_loop())

            @EXAMPLES
            @given(
                st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=30),
                st.binary(max_size=300) | json_values.map(lambda value: json.dumps(value).encode()),
                st.sampled_from(["application/json", "application/x-www-form-urlencoded", "text/plain", ""]),
            )
            def check(event: str, body: bytes, content_type: str) -> None:
                request = signing.github_raw(GITHUB_SECRET, event, body, content_type=content_type)
                no_server_error(sender.send(request))
                slack = signing.slack_raw(SLACK_SECRET, signing.SLACK_EVENTS_PATH, body, content_type)
                no_server_error(sender.send(slack))
                interaction = signing.slack_raw(SLACK_SECRET, signing.SLACK_INTERACTIVITY_PATH, body, content_type)
                no_server_error(sender.send(interaction))
                no_server_error(sender.send(signing.linear_raw(LINEAR_SECRET, body)))

            await asyncio.to_thread(check)

    async def test_signed_real_payloads_with_one_part_replaced(self, start_ingress: StartIngress, repo: str) -> None:
        issue = fake_linear.LinearIssue("issue-1", "DRY-1", "t")
        payloads: list[tuple[str, dict[str, Any]]] = [
            ("issue_comment", webhooks.issue_comment(ORG, repo, 1, "@drydock go")),
            ("issue_comment", webhooks.issue_comment(ORG, repo, 2, "@drydock go", pull_request=True)),
            ("pull_request", webhooks.pull_request(ORG, repo, 3, "opened")),
            (
                "pull_request_review_comment",
                webhooks.review_comment(ORG, repo, 4, "x", head_ref="drydock/0123456789ab"),
            ),
            ("push", webhooks.push(ORG, repo, "drydock/0123456789ab-y")),
            ("check_run", webhooks.check_run(ORG, repo)),
            ("slack", fake_slack.app_mention("C1", "1.000001", f"<@U0DRYBOT> go repo:{ORG}/{repo}")),
            ("slack", fake_slack.message("D1", "1.000002", "hi", channel_type="im")),
            ("linear", fake_linear.comment_created(issue, f"@drydock go repo:{ORG}/{repo}")),
            ("linear", fake_linear.agent_session_created(issue, "s-1", prompt_context="x")),
        ]
        async with start_ingress() as running:
            await trust(running, repo, reviewer=True)
            sender = Sender(running.client, asyncio.get_running_loop())

            @EXAMPLES
            @given(st.sampled_from(payloads), st.data())
            def check(chosen: tuple[str, dict[str, Any]], data: st.DataObject) -> None:
                kind, payload = chosen
                changed = data.draw(mutated([payload]))
                if kind == "slack":
                    request = signing.slack_event(SLACK_SECRET, changed)
                elif kind == "linear":
                    request = signing.linear(LINEAR_SECRET, changed)
                else:
                    request = signing.github(GITHUB_SECRET, kind, changed)
                no_server_error(sender.send(request))

            await asyncio.to_thread(check)


ID_KEYS = frozenset({"id", "user", "userId", "creatorId", "login"})
GITHUB_EVENTS = [
    "branch_protection_configuration",
    "code_scanning_alert",
    "deployment_status",
    "installation_repositories",
    "merge_group",
    "personal_access_token_request",
    "projects_v2",
    "projects_v2_item",
    "projects_v2_status_update",
    "repository_vulnerability_alert",
    "security_and_analysis",
    "sub_issues",
]
"""Events GitHub sends that the ingress does not route, several with digits in their names."""
hostile_ids = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12).filter(
    lambda text: any(char.isspace() or not char.isprintable() for char in text)
)


def deep(depth: int) -> Any:
    value: Any = 0
    for level in range(depth):
        value = [value] if level % 2 else {"d": value}
    return value


class TestHostileParts:
    async def test_ids_with_whitespace_and_deep_values(self, start_ingress: StartIngress, repo: str) -> None:
        issue = fake_linear.LinearIssue("issue-1", "DRY-1", "t")
        payloads: list[tuple[str, dict[str, Any]]] = [
            ("issue_comment", webhooks.issue_comment(ORG, repo, 1, "@drydock go")),
            ("pull_request", webhooks.pull_request(ORG, repo, 3, "opened")),
            ("check_run", webhooks.check_run(ORG, repo)),
            ("slack", fake_slack.app_mention("C1", "1.000001", f"<@U0DRYBOT> go repo:{ORG}/{repo}")),
            ("linear", fake_linear.comment_created(issue, f"@drydock go repo:{ORG}/{repo}")),
            ("linear", fake_linear.agent_session_prompted(issue, "s-1", "more")),
        ]
        async with start_ingress(slack={"bot_user_id": "U0DRYBOT"}) as running:
            await trust(running, repo, reviewer=True)
            sender = Sender(running.client, asyncio.get_running_loop())

            @EXAMPLES
            @given(st.sampled_from(payloads), st.data(), st.integers(min_value=1, max_value=400))
            def check(chosen: tuple[str, dict[str, Any]], data: st.DataObject, depth: int) -> None:
                kind, payload = chosen
                changed: dict[str, Any] = json.loads(json.dumps(payload))
                where = data.draw(st.sampled_from(paths(changed)))
                parent: Any = changed
                for step in where[:-1]:
                    parent = parent[step]
                hostile_id = where[-1] in ID_KEYS and data.draw(st.booleans())
                parent[where[-1]] = data.draw(hostile_ids) if hostile_id else deep(depth)
                if kind == "slack":
                    request = signing.slack_event(SLACK_SECRET, changed)
                elif kind == "linear":
                    request = signing.linear(LINEAR_SECRET, changed)
                else:
                    request = signing.github(GITHUB_SECRET, kind, changed)
                response = sender.send(request)
                no_server_error(response)
                if not hostile_id and len(where) + depth > MAX_DEPTH:
                    assert response.status_code == 400, response.text
                    assert f"{MAX_DEPTH} levels" in response.json()["error"]

            await asyncio.to_thread(check)

    async def test_every_event_name_github_sends_is_answered_2xx(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            sender = Sender(running.client, asyncio.get_running_loop())

            @EXAMPLES
            @given(st.sampled_from(GITHUB_EVENTS) | st.from_regex(r"[a-z][a-z0-9_]{0,40}", fullmatch=True))
            def check(event: str) -> None:
                payload = {"action": "created", "repository": webhooks.repository(ORG, repo)}
                response = sender.send(signing.github(GITHUB_SECRET, event, payload))
                no_server_error(response)
                if event in GITHUB_EVENTS:
                    assert response.status_code == 200, response.text
                    assert response.json()["status"] == "ignored"

            await asyncio.to_thread(check)
