"""Details of each channel's parser that the endpoint tests do not show."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from drydock.channels.errors import MalformedDelivery
from drydock.channels.github import parse as github_parse
from drydock.channels.github.conversation import GithubConversation
from drydock.channels.intents import BranchPush, Delivery, Forward, Message, ReviewRequest
from drydock.channels.linear import parse as linear_parse
from drydock.channels.slack import parse as slack_parse
from tests.fakes import linear as fake_linear
from tests.fakes import slack as fake_slack
from tests.fakes.github import webhooks


def github(event: str, payload: dict[str, object], **headers: str) -> Delivery:
    all_headers = {"x-github-event": event, "x-github-delivery": "d-1", "content-type": "application/json", **headers}
    return github_parse.parse(all_headers, json.dumps(payload).encode(), host="ghe.example.com", app_slug="drydock")


class TestGithub:
    def test_a_pull_request_comment_names_the_pull_request(self) -> None:
        (message,) = github("issue_comment", webhooks.issue_comment("acme", "api", 5, "hi", pull_request=True)).intents
        assert isinstance(message, Message)
        assert message.conversation == GithubConversation("ghe.example.com", "acme", "api", 5, True)
        assert message.reply_to.address["kind"] == "pull_request"

    def test_a_repository_webhook_without_installation(self) -> None:
        (message,) = github(
            "issue_comment", webhooks.issue_comment("acme", "api", 5, "hi", installation_id=None)
        ).intents
        assert isinstance(message, Message)
        assert "installation_id" not in message.reply_to.address

    def test_the_agents_own_account_is_flagged(self) -> None:
        payload = webhooks.issue_comment("acme", "api", 5, "done", author=webhooks.user("Drydock[bot]", kind="Bot"))
        (message,) = github("issue_comment", payload).intents
        assert isinstance(message, Message)
        assert message.sender.agent
        assert message.sender.bot

    def test_a_pull_request_is_forwarded_and_may_ask_for_review(self) -> None:
        forward, review = github("pull_request", webhooks.pull_request("acme", "api", 9, "synchronize")).intents
        assert isinstance(forward, Forward)
        assert forward.event.action == "synchronize"
        assert isinstance(review, ReviewRequest)
        (closed,) = github("pull_request", webhooks.pull_request("acme", "api", 9, "closed")).intents
        assert isinstance(closed, Forward)

    def test_pushes_to_agent_branches_only(self) -> None:
        (push,) = github("push", webhooks.push("acme", "api", "drydock/0123456789ab-x")).intents
        assert isinstance(push, BranchPush)
        assert push.branch == "drydock/0123456789ab-x"
        assert (
            github("push", webhooks.push("acme", "api", "main")).ignored
            == "push to a branch that is not an agent branch"
        )
        deleted = github("push", webhooks.push("acme", "api", "drydock/0123456789ab", deleted=True))
        assert deleted.ignored == "branch deletion"

    @pytest.mark.parametrize("event", ["Issue_Comment", "issue.comment", "", "x" * 65])
    def test_invalid_event_names(self, event: str) -> None:
        with pytest.raises(MalformedDelivery, match="X-GitHub-Event"):
            github(event, {})

    @pytest.mark.parametrize("owner", ["ac:me", ".", "..", "acme\n"])
    def test_an_owner_name_that_cannot_be_a_repository(self, owner: str) -> None:
        payload = webhooks.issue_comment("acme", "api", 1, "hi")
        payload["repository"]["owner"]["login"] = owner
        with pytest.raises(MalformedDelivery, match="not a GitHub name"):
            github("issue_comment", payload)

    def test_a_comment_and_a_review_say_when_they_were_written(self) -> None:
        payload = webhooks.issue_comment("acme", "api", 5, "hi")
        payload["comment"]["created_at"] = "2026-12-01T10:00:00Z"
        (message,) = github("issue_comment", payload).intents
        assert isinstance(message, Message)
        assert message.written_at == datetime(2026, 12, 1, 10, tzinfo=UTC)
        review = webhooks.review("acme", "api", 5, "nits")
        review["review"]["submitted_at"] = "2026-12-01T11:00:00Z"
        (message,) = github("pull_request_review", review).intents
        assert isinstance(message, Message)
        assert message.written_at == datetime(2026, 12, 1, 11, tzinfo=UTC)

    @pytest.mark.parametrize("value", ["yesterday", "2026-12-01T10:00:00"])
    def test_a_time_that_is_none_is_malformed(self, value: str) -> None:
        payload = webhooks.issue_comment("acme", "api", 5, "hi")
        payload["comment"]["created_at"] = value
        with pytest.raises(MalformedDelivery, match="'created_at' is not a time"):
            github("issue_comment", payload)

    def test_a_delivery_id_ending_in_a_newline(self) -> None:
        with pytest.raises(MalformedDelivery, match="X-GitHub-Delivery"):
            github("ping", webhooks.ping(), **{"x-github-delivery": "d-1\n"})


class TestSlack:
    def test_the_configured_bot_id_when_events_carry_no_authorizations(self) -> None:
        payload = fake_slack.message("C1", "1.000002", "<@U0ME> hi", thread_ts="1.000001")
        del payload["authorizations"]
        body = json.dumps(payload).encode()
        headers = {"content-type": "application/json"}
        assert slack_parse.parse_event(headers, body).intents, "without a bot id the reply is a follow-up"
        ignored = slack_parse.parse_event(headers, body, bot_user_id="U0ME")
        assert ignored.ignored == "a channel message mentioning the bot is routed as its app_mention"

    @pytest.mark.parametrize("ts", ["yesterday", "1.000001\n"])
    def test_bad_timestamps_are_malformed(self, ts: str) -> None:
        payload = fake_slack.app_mention("C1", ts, "<@U0DRYBOT> hi")
        with pytest.raises(MalformedDelivery, match="Slack timestamp"):
            slack_parse.parse_event({"content-type": "application/json"}, json.dumps(payload).encode())

    def test_an_id_ending_in_a_newline_is_malformed(self) -> None:
        payload = fake_slack.app_mention("C1\n", "1.000001", "<@U0DRYBOT> hi")
        with pytest.raises(MalformedDelivery, match="'channel' is not a Slack id"):
            slack_parse.parse_event({"content-type": "application/json"}, json.dumps(payload).encode())


class TestLinear:
    def test_the_delivery_id_falls_back_to_a_digest_of_the_body(self) -> None:
        issue = fake_linear.LinearIssue("i-1", "DRY-1", "t")
        body = json.dumps(fake_linear.comment_created(issue, "@drydock")).encode()
        headers = {"content-type": "application/json"}
        first = linear_parse.parse(headers, body)
        assert first.delivery_id.startswith("sha256-")
        assert linear_parse.parse(headers, body).delivery_id == first.delivery_id

    def test_a_comment_and_a_prompt_say_when_they_were_written(self) -> None:
        issue = fake_linear.LinearIssue("i-1", "DRY-1", "t")
        comment = fake_linear.comment_created(issue, "@drydock approve")
        comment["data"]["createdAt"] = "2026-12-01T10:00:00.000Z"
        prompt = fake_linear.agent_session_prompted(issue, "session-1", "approve")
        prompt["agentActivity"]["createdAt"] = "2026-12-01T11:00:00.000Z"
        for payload, hour in [(comment, 10), (prompt, 11)]:
            (message,) = linear_parse.parse({"content-type": "application/json"}, json.dumps(payload).encode()).intents
            assert isinstance(message, Message)
            assert message.written_at == datetime(2026, 12, 1, hour, tzinfo=UTC)

    def test_a_reply_comment_answers_in_its_thread(self) -> None:
        issue = fake_linear.LinearIssue("i-1", "DRY-1", "t")
        payload = fake_linear.comment_created(issue, "and this?", parent_id="root-comment")
        (message,) = linear_parse.parse({"content-type": "application/json"}, json.dumps(payload).encode()).intents
        assert isinstance(message, Message)
        assert message.reply_to.address["parent_comment_id"] == "root-comment"


class TestIdentity:
    """``Delivery.identity``: the delivered object as the signed body names it, for the events
    that carry one (the ingress de-duplicates replays under a new delivery id by it)."""

    def test_github_comments_reviews_and_issues_are_named_by_event_action_and_id(self) -> None:
        comment = webhooks.issue_comment("acme", "api", 5, "hi", comment_id=77)
        review_comment = webhooks.review_comment("acme", "api", 5, "here", comment_id=77)
        review = webhooks.review("acme", "api", 5, "nits")
        issue = webhooks.issues_opened("acme", "api", 5, "t", "b")
        assert github("issue_comment", comment).identity == "issue_comment.created:77"
        assert github("pull_request_review_comment", review_comment).identity == (
            "pull_request_review_comment.created:77"
        )
        assert (
            github("pull_request_review", review).identity == f"pull_request_review.submitted:{review['review']['id']}"
        )
        assert github("issues", issue).identity == f"issues.opened:{issue['issue']['id']}"

    def test_a_review_that_only_requests_changes_is_named_too(self) -> None:
        review = webhooks.review("acme", "api", 5, None, state="changes_requested")
        assert (
            github("pull_request_review", review).identity == f"pull_request_review.submitted:{review['review']['id']}"
        )

    def test_github_events_without_an_identity(self) -> None:
        assert github("pull_request", webhooks.pull_request("acme", "api", 9, "synchronize")).identity is None
        assert github("push", webhooks.push("acme", "api", "drydock/0123456789ab-x")).identity is None
        assert github("check_run", webhooks.check_run("acme", "api")).identity is None

    def test_linear_comments_and_agent_sessions(self) -> None:
        issue = fake_linear.LinearIssue("i-1", "DRY-1", "t")
        comment = fake_linear.comment_created(issue, "@drydock go", comment_id="c-1")
        created = fake_linear.agent_session_created(issue, "s-1")
        prompted = fake_linear.agent_session_prompted(issue, "s-1", "more")
        identities = [
            linear_parse.parse({"content-type": "application/json"}, json.dumps(payload).encode()).identity
            for payload in (comment, created, prompted)
        ]
        assert identities == [
            "Comment.create:c-1",
            "AgentSessionEvent.created:s-1",
            f"AgentSessionEvent.prompted:{prompted['agentActivity']['id']}",
        ]

    def test_a_prompt_without_an_activity_id_has_none(self) -> None:
        issue = fake_linear.LinearIssue("i-1", "DRY-1", "t")
        prompted = fake_linear.agent_session_prompted(issue, "s-1", "more")
        del prompted["agentActivity"]["id"]
        assert linear_parse.parse({"content-type": "application/json"}, json.dumps(prompted).encode()).identity is None

    def test_slack_needs_none(self) -> None:
        payload = fake_slack.app_mention("C1", "1.000001", "<@U0DRYBOT> hi")
        assert (
            slack_parse.parse_event({"content-type": "application/json"}, json.dumps(payload).encode()).identity is None
        )
