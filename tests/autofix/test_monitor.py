"""The fallback monitor: it finds through the GitHub API what missed webhooks would have said."""

from __future__ import annotations

from drydock.autofix.monitor import Monitor
from drydock.autofix.policy import Outcome, Rule
from drydock.autofix.review_feedback import Feedback, unanswered
from drydock.threads.pr_records import PullRequestState
from tests.autofix.conftest import READER, REPO, WRITER, AgentPull, World, sha
from tests.fakes.github import webhooks as hooks
from tests.fakes.github.activity import activity_of
from tests.fakes.github.reviews import Review, reviews_of


class TestMonitor:
    async def test_finds_a_failure_whose_webhook_was_never_delivered(self, world: World) -> None:
        pull = await world.agent_pull()
        world.fail(pull.head_sha, "tests")

        found = await Monitor(world.controller).scan_pull(pull.record)

        assert [considered.decision.outcome for considered in found] == [Outcome.DISPATCH]
        (message,) = await world.inbox(pull.thread_id)
        assert message.references["head_sha"] == pull.head_sha
        (decision,) = await world.decisions(pull.thread_id)
        assert decision["source"] == "monitor"

    async def test_a_scan_covers_every_open_agent_pull_request_and_repeats_nothing(self, world: World) -> None:
        failing, green = await world.agent_pull(), await world.agent_pull()
        world.fail(failing.head_sha, "tests")
        monitor = Monitor(world.controller)

        await monitor.scan()
        await monitor.scan()

        assert len(await world.inbox(failing.thread_id)) == 1
        assert await world.inbox(green.thread_id) == []
        assert len(await world.decisions(failing.thread_id)) == 1, "the second scan's skip is not recorded again"

    async def test_a_merge_conflict_is_found(self, world: World) -> None:
        pull = await world.agent_pull()
        world.history.set_mergeable(REPO, pull.number, False)
        await Monitor(world.controller).scan_pull(pull.record)
        (message,) = await world.inbox(pull.thread_id)
        assert message.references["trigger"] == "conflict"

    async def test_a_pull_request_closed_without_event_is_marked_closed(self, world: World) -> None:
        pull = await world.agent_pull()
        world.github.state.pulls[(REPO, pull.number)].state = "closed"
        await Monitor(world.controller).scan_pull(pull.record)
        record = await world.controller.records.find("github.com", REPO, pull.number)
        assert record is not None
        assert record.state is PullRequestState.CLOSED

    async def test_a_disabled_pull_request_costs_no_api_call(self, world: World) -> None:
        pull = await world.agent_pull(repository_flag=False)
        world.fail(pull.head_sha, "tests")
        before = len(world.github.requests)
        assert await Monitor(world.controller).scan_pull(pull.record) == []
        assert world.github.requests[before:] == []

    async def test_pending_requests_of_a_repair_that_expired_are_decided(self, world: World) -> None:
        pull = await world.agent_pull()
        world.fail(pull.head_sha, "tests")
        await world.controller.handle(world.check_run_event(pull))
        newer = sha(f"{pull.thread_id}:2")
        world.push(REPO, pull.branch, newer, by_agent=True)
        world.fail(newer, "tests")
        await world.controller.handle(world.check_run_event(pull, head=newer))
        repair = await world.controller.repairs.active(pull.thread_id)
        assert repair is not None
        await world.controller.repairs.finish(pull.thread_id, repair.id)

        await Monitor(world.controller).scan_pull(pull.record)

        inbox = await world.inbox(pull.thread_id)
        assert [message.references["head_sha"] for message in inbox] == [pull.head_sha, newer]


def request_changes(world: World, pull: AgentPull, login: str, *, on: str | None = None) -> Review:
    """A review requesting changes that GitHub has, though its webhook never arrived; submitted
    before any comment a test adds after it."""
    state = world.github.state
    review = Review(
        state.next_id(), REPO, pull.number, "Please split this.", "CHANGES_REQUESTED", on or pull.head_sha,
        hooks.user(login), submitted_at="2020-01-01T00:00:00Z",
    )  # fmt: skip
    reviews_of(state).reviews[review.id] = review
    return review


def review_comment(world: World, pull: AgentPull, login: str, *, on: str | None = None) -> int:
    comment = reviews_of(world.github.state).add_comment(
        REPO, pull.number, "This name is unclear.", path="calc.py", line=1,
        user=hooks.user(login, kind="Bot" if login.endswith("[bot]") else "User"),
        commit_id=on or pull.head_sha,
    )  # fmt: skip
    return comment.id


class TestMissedReviewFeedback:
    async def test_an_unanswered_change_request_by_a_writer_gets_a_repair(self, world: World) -> None:
        pull = await world.agent_pull()
        request_changes(world, pull, WRITER)

        found = await Monitor(world.controller).scan_pull(pull.record)

        assert [considered.decision.outcome for considered in found] == [Outcome.DISPATCH]
        (message,) = await world.inbox(pull.thread_id)
        assert message.references["trigger"] == "review"
        assert WRITER in message.text
        (decision,) = await world.decisions(pull.thread_id)
        assert decision["source"] == "monitor"

    async def test_an_unanswered_review_comment_by_a_writer_gets_a_repair(self, world: World) -> None:
        pull = await world.agent_pull()
        review_comment(world, pull, WRITER)
        await Monitor(world.controller).scan_pull(pull.record)
        (message,) = await world.inbox(pull.thread_id)
        assert message.references["trigger"] == "review"

    async def test_answered_older_and_bot_feedback_is_left_alone(self, world: World) -> None:
        pull = await world.agent_pull()
        answered = review_comment(world, pull, WRITER)
        activity_of(world.github.state).add_comment(
            REPO, pull.number, "Renamed it.", login="drydock[bot]", kind="review_comment", in_reply_to=answered
        )
        request_changes(world, pull, WRITER, on=sha(f"{pull.thread_id}:older"))
        review_comment(world, pull, "renovate[bot]")

        assert await Monitor(world.controller).scan_pull(pull.record) == []
        assert await world.inbox(pull.thread_id) == []

    async def test_a_readers_newer_comment_does_not_hide_a_writers_request(self, world: World) -> None:
        pull = await world.agent_pull()
        request_changes(world, pull, WRITER)
        review_comment(world, pull, READER)

        found = await Monitor(world.controller).scan_pull(pull.record)

        assert [(c.signal.actor, c.decision.outcome) for c in found] == [
            (READER, Outcome.SKIP),
            (WRITER, Outcome.DISPATCH),
        ]
        assert found[0].decision.rule is Rule.NOT_A_WRITER
        assert len(await world.inbox(pull.thread_id)) == 1

    async def test_feedback_already_repaired_is_not_dispatched_again(self, world: World) -> None:
        pull = await world.agent_pull()
        request_changes(world, pull, WRITER)
        monitor = Monitor(world.controller)
        await monitor.scan_pull(pull.record)
        repair = await world.controller.repairs.active(pull.thread_id)
        assert repair is not None
        await world.controller.repairs.finish(pull.thread_id, repair.id)

        await monitor.scan_pull(pull.record)

        assert len(await world.inbox(pull.thread_id)) == 1


class TestUnanswered:
    HEAD = "a" * 40

    def test_newest_first_and_only_peoples_feedback_on_the_head(self) -> None:
        person, bot = {"login": "ada", "type": "User"}, {"login": "ci[bot]", "type": "Bot"}
        reviews = [
            {
                "user": person,
                "state": "CHANGES_REQUESTED",
                "commit_id": self.HEAD,
                "submitted_at": "2026-01-01T10:00:00Z",
            },
            {"user": person, "state": "APPROVED", "commit_id": self.HEAD, "submitted_at": "2026-01-01T11:00:00Z"},
            {"user": bot, "state": "CHANGES_REQUESTED", "commit_id": self.HEAD, "submitted_at": "2026-01-01T12:00:00Z"},
        ]
        comments = [
            {"id": 1, "user": person, "original_commit_id": self.HEAD, "created_at": "2026-01-01T13:00:00Z"},
            {"id": 2, "user": person, "original_commit_id": self.HEAD, "created_at": "2026-01-01T14:00:00Z"},
            {"id": 3, "user": {"login": "drydock[bot]", "type": "Bot"}, "in_reply_to_id": 2},
            {"id": 4, "user": person, "original_commit_id": "b" * 40, "created_at": "2026-01-01T15:00:00Z"},
        ]
        found = unanswered(reviews, comments, head_sha=self.HEAD, agent_login="drydock[bot]")
        assert found == [Feedback("ada", "", "2026-01-01T13:00:00Z"), Feedback("ada", "", "2026-01-01T10:00:00Z")]

    def test_a_reply_by_another_bot_answers_nothing_when_the_agent_is_known(self) -> None:
        person = {"login": "ada", "type": "User"}
        comments = [
            {"id": 1, "user": person, "original_commit_id": self.HEAD, "created_at": "2026-01-01T13:00:00Z"},
            {"id": 2, "user": {"login": "other[bot]", "type": "Bot"}, "in_reply_to_id": 1},
        ]
        assert len(unanswered([], comments, head_sha=self.HEAD, agent_login="drydock[bot]")) == 1
        assert unanswered([], comments, head_sha=self.HEAD, agent_login=None) == []
