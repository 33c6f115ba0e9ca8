"""Property tests: whatever a verified body says, a parser returns a :class:`Delivery` or raises
:class:`MalformedDelivery`, never anything else; and a verifier raises only
:class:`VerificationFailed`. Bodies are arbitrary bytes, arbitrary JSON, and real payloads
with one part replaced or removed."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drydock.channels.errors import MalformedDelivery, VerificationFailed
from drydock.channels.github import parse as github_parse
from drydock.channels.github import verify as github_verify
from drydock.channels.intents import Delivery
from drydock.channels.linear import parse as linear_parse
from drydock.channels.linear import verify as linear_verify
from drydock.channels.slack import parse as slack_parse
from drydock.channels.slack import verify as slack_verify
from tests.fakes import linear as fake_linear
from tests.fakes import slack as fake_slack
from tests.fakes.github import webhooks

EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=15,
)

_ISSUE = fake_linear.LinearIssue("issue-1", "DRY-1", "Title")
GITHUB_PAYLOADS: dict[str, dict[str, Any]] = {
    "issue_comment": webhooks.issue_comment("acme", "widgets", 1, "@drydock hi"),
    "issues": webhooks.issues_opened("acme", "widgets", 2, "t", "@drydock b"),
    "pull_request": webhooks.pull_request("acme", "widgets", 3, "opened"),
    "pull_request_review_comment": webhooks.review_comment(
        "acme", "widgets", 4, "nit", head_ref="drydock/0123456789ab-x"
    ),
    "pull_request_review": webhooks.review("acme", "widgets", 5, "please change"),
    "push": webhooks.push("acme", "widgets", "drydock/0123456789ab-x"),
    "check_run": webhooks.check_run("acme", "widgets"),
}
SLACK_EVENTS = [
    fake_slack.app_mention("C1", "1.000001", "<@U0DRYBOT> hi"),
    fake_slack.message("D1", "1.000002", "hi", channel_type="im"),
    fake_slack.message("C1", "1.000003", "reply", thread_ts="1.000001"),
    fake_slack.url_verification("challenge"),
]
SLACK_INTERACTIONS = [
    fake_slack.block_actions("C1", "1.000004", "approve", "yes", thread_ts="1.000001"),
    fake_slack.message_action("C1", "1.000005", "look"),
]
LINEAR_PAYLOADS = [
    fake_linear.comment_created(_ISSUE, "@drydock go"),
    fake_linear.agent_session_created(_ISSUE, "session-1", prompt_context="ctx"),
    fake_linear.agent_session_prompted(_ISSUE, "session-1", "more"),
]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths(child, (*prefix, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, payloads: list[dict[str, Any]]) -> dict[str, Any]:
    """A real payload with one value replaced by arbitrary JSON, or removed."""
    payload: dict[str, Any] = json.loads(json.dumps(draw(st.sampled_from(payloads))))
    path = draw(st.sampled_from(paths(payload)))
    parent: Any = payload
    for step in path[:-1]:
        parent = parent[step]
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(json_values)
    return payload


def parses_or_refuses(parse: Callable[[], Delivery]) -> None:
    reason: str | None = None
    try:
        delivery = parse()
    except MalformedDelivery as error:
        reason = error.reason
    if reason is not None:
        assert reason, "a refusal names its reason"
        return
    assert isinstance(delivery, Delivery)
    assert delivery.intents or delivery.ignored or delivery.challenge is not None


def github_headers(event: str, content_type: str = "application/json") -> dict[str, str]:
    return {"x-github-event": event, "x-github-delivery": str(uuid.uuid4()), "content-type": content_type}


class TestGithubParser:
    @EXAMPLES
    @given(st.binary(max_size=512), st.sampled_from([*GITHUB_PAYLOADS, "ping", "star", "", "Bad.Event"]))
    def test_arbitrary_bytes(self, body: bytes, event: str) -> None:
        parses_or_refuses(lambda: github_parse.parse(github_headers(event), body, host="github.com"))

    @EXAMPLES
    @given(st.sampled_from(sorted(GITHUB_PAYLOADS)), st.data())
    def test_mutated_payloads(self, event: str, data: st.DataObject) -> None:
        payload = data.draw(mutated([GITHUB_PAYLOADS[event]]))
        body = json.dumps(payload).encode()
        parses_or_refuses(
            lambda: github_parse.parse(github_headers(event), body, host="github.com", app_slug="drydock")
        )

    @EXAMPLES
    @given(
        st.dictionaries(st.sampled_from(["x-github-event", "x-github-delivery", "content-type"]), st.text(max_size=40))
    )
    def test_arbitrary_headers(self, headers: dict[str, str]) -> None:
        body = json.dumps(GITHUB_PAYLOADS["issue_comment"]).encode()
        parses_or_refuses(lambda: github_parse.parse(headers, body, host="github.com"))

    @EXAMPLES
    @given(st.text(max_size=40).map(lambda text: urlencode({"payload": text}).encode()))
    def test_arbitrary_forms(self, body: bytes) -> None:
        headers = github_headers("issue_comment", "application/x-www-form-urlencoded")
        parses_or_refuses(lambda: github_parse.parse(headers, body, host="github.com"))


class TestSlackParser:
    @EXAMPLES
    @given(st.data())
    def test_mutated_events(self, data: st.DataObject) -> None:
        body = json.dumps(data.draw(mutated(SLACK_EVENTS))).encode()
        parses_or_refuses(lambda: slack_parse.parse_event({"content-type": "application/json"}, body))

    @EXAMPLES
    @given(st.data())
    def test_mutated_interactions(self, data: st.DataObject) -> None:
        body = urlencode({"payload": json.dumps(data.draw(mutated(SLACK_INTERACTIONS)))}).encode()
        headers = {"content-type": "application/x-www-form-urlencoded"}
        parses_or_refuses(lambda: slack_parse.parse_interaction(headers, body))

    @EXAMPLES
    @given(st.binary(max_size=256), st.sampled_from(["application/json", "application/x-www-form-urlencoded", ""]))
    def test_arbitrary_bytes(self, body: bytes, content_type: str) -> None:
        headers = {"content-type": content_type}
        parses_or_refuses(lambda: slack_parse.parse_event(headers, body))
        parses_or_refuses(lambda: slack_parse.parse_interaction(headers, body))


class TestLinearParser:
    @EXAMPLES
    @given(st.data())
    def test_mutated_payloads(self, data: st.DataObject) -> None:
        body = json.dumps(data.draw(mutated(LINEAR_PAYLOADS))).encode()
        parses_or_refuses(lambda: linear_parse.parse({"content-type": "application/json"}, body))

    @EXAMPLES
    @given(st.binary(max_size=256), st.text(max_size=60))
    def test_arbitrary_bytes_and_delivery_ids(self, body: bytes, delivery: str) -> None:
        headers = {"content-type": "application/json", "linear-delivery": delivery}
        parses_or_refuses(lambda: linear_parse.parse(headers, body))


class TestVerifiers:
    @EXAMPLES
    @given(st.binary(max_size=128), st.none() | st.text(max_size=80))
    def test_github_raises_only_verification_failed(self, body: bytes, header: str | None) -> None:
        try:
            github_verify.verify(b"secret", body, header)
        except VerificationFailed:
            return
        assert header == github_verify.signature(b"secret", body)

    @EXAMPLES
    @given(st.binary(max_size=128), st.none() | st.text(max_size=30), st.none() | st.text(max_size=80))
    def test_slack_raises_only_verification_failed(
        self, body: bytes, timestamp: str | None, header: str | None
    ) -> None:
        try:
            slack_verify.verify(b"secret", body, timestamp=timestamp, header=header)
        except VerificationFailed:
            return
        assert timestamp is not None
        assert header == slack_verify.signature(b"secret", timestamp.strip(), body)

    @EXAMPLES
    @given(json_values)
    def test_linear_timestamp_raises_only_verification_failed(self, value: Any) -> None:
        try:
            linear_verify.verify_timestamp({"webhookTimestamp": value})
        except VerificationFailed:
            return
        assert abs(time.time() * 1000 - value) <= 60_000
