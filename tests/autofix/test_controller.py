"""The controller on real NATS and Valkey against the GitHub double: events about agent pull
requests become repair runs, or recorded skips, exactly once."""

from __future__ import annotations

import asyncio

from drydock.autofix.overrides import OverrideSource
from drydock.autofix.policy import Kind, Outcome, OverrideState
from drydock.bus import Channel, EventType, RunEvent, Trigger
from tests.autofix.conftest import NAME, ORG, OWNER_ID, READER, REPO, WRITER, AgentPull, World, event, sha
from tests.fakes.github import webhooks as hooks
from tests.fakes.github.activity import activity_of


def rules(decisions: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(decision["outcome"], decision.get("rule")) for decision in decisions]


async def dispatched(world: World, pull: AgentPull) -> None:
    world.fail(pull.head_sha, "tests")
    (considered,) = await world.controller.handle(world.check_run_event(pull))
    assert considered.decision.outcome is Outcome.DISPATCH


class TestRepairDispatch:
    async def test_a_failing_check_sends_the_creating_thread_a_repair_run(self, world: World) -> None:
        pull = await world.agent_pull()
        world.fail(pull.head_sha, "tests")

        await world.controller.handle(world.check_run_event(pull))

        (message,) = await world.inbox(pull.thread_id)
        assert message.channel is Channel.AUTOFIX
        assert message.trigger is Trigger.REPAIR
        assert message.references["pull_request"] == str(pull.number)
        assert message.references["head_sha"] == pull.head_sha
        assert message.references["checks"] == "tests"
        assert message.reply_to.address["number"] == "7", "replies still go to the thread's own conversation"
        assert "`tests` failed" in message.text
        assert "report_confidence" in message.text
        assert await world.wakes(pull.thread_id) == 1
        (decision,) = await world.decisions(pull.thread_id)
        assert (decision["outcome"], decision["rule"], decision["checks"]) == ("dispatch", "repair", ["tests"])
        repair = await world.controller.repairs.active(pull.thread_id)
        assert repair is not None
        assert repair.id == message.references["autofix_repair"]

    async def test_a_burst_of_twenty_failure_events_is_one_repair_run(self, world: World) -> None:
        pull = await world.agent_pull()
        names = [f"job-{index}" for index in range(20)]
        world.fail(pull.head_sha, *names)

        results = await asyncio.gather(*(world.controller.handle(world.check_run_event(pull, name)) for name in names))

        outcomes = [considered.decision.outcome for found in results for considered in found]
        assert outcomes.count(Outcome.DISPATCH) == 1
        assert len(await world.inbox(pull.thread_id)) == 1
        assert await world.wakes(pull.thread_id) == 1
        assert len(await world.decisions(pull.thread_id)) == 20

    async def test_a_redelivered_event_is_not_repaired_twice(self, world: World) -> None:
        pull = await world.agent_pull()
        world.fail(pull.head_sha, "tests")
        again = world.check_run_event(pull)
        await world.controller.handle(again)
        await world.controller.repairs.finish(
            pull.thread_id, (await world.inbox(pull.thread_id))[0].references["autofix_repair"]
        )

        await world.controller.handle(again)

        assert len(await world.inbox(pull.thread_id)) == 1
        assert rules(await world.decisions(pull.thread_id))[-1] == ("skip", "already_processed")

    async def test_events_about_other_pull_requests_are_ignored(self, world: World) -> None:
        payload = hooks.check_run(ORG, NAME, head_sha=sha("someone"), pull_numbers=(999_999,))
        assert await world.controller.handle(event("check_run", payload)) == []
        success = hooks.check_run(ORG, NAME, conclusion="success", pull_numbers=(999_999,))
        assert await world.controller.handle(event("check_run", success)) == []

    async def test_a_failure_without_pull_request_numbers_is_found_by_its_branch(self, world: World) -> None:
        pull = await world.agent_pull()
        world.fail(pull.head_sha, "build")
        payload = hooks.check_suite(ORG, NAME, head_sha=pull.head_sha, head_branch=pull.branch)

        (considered,) = await world.controller.handle(event("check_suite", payload))

        assert considered.decision.outcome is Outcome.DISPATCH
        assert considered.decision.checks == ("build",)

    async def test_a_failing_workflow_run_is_repaired(self, world: World) -> None:
        pull = await world.agent_pull()
        world.fail(pull.head_sha, "unit")
        payload = hooks.workflow_run(
            ORG, NAME, head_sha=pull.head_sha, head_branch=pull.branch, pull_numbers=(pull.number,)
        )
        (considered,) = await world.controller.handle(event("workflow_run", payload))
        assert considered.decision.outcome is Outcome.DISPATCH


class TestSkipRules:
    async def test_a_failure_also_on_the_base_branch_is_skipped(self, world: World) -> None:
        pull = await world.agent_pull()
        base = sha(f"{pull.thread_id}:main")
        world.history.set_branch(REPO, pull.base, base)
        world.fail(base, "tests")
        world.fail(pull.head_sha, "tests")

        await world.controller.handle(world.check_run_event(pull))

        assert await world.inbox(pull.thread_id) == []
        (decision,) = await world.decisions(pull.thread_id)
        assert (decision["outcome"], decision["rule"]) == ("skip", "failing_on_base")

    async def test_a_head_pushed_by_a_person_is_skipped(self, world: World) -> None:
        pull = await world.agent_pull()
        by_person = sha(f"{pull.thread_id}:person")
        world.push(REPO, pull.branch, by_person, by_agent=False)
        world.fail(by_person, "tests")

        await world.controller.handle(world.check_run_event(pull, head=by_person))

        assert await world.inbox(pull.thread_id) == []
        assert rules(await world.decisions(pull.thread_id)) == [("skip", "pushed_by_person")]

    async def test_an_event_about_an_older_head_is_skipped(self, world: World) -> None:
        pull = await world.agent_pull()
        newer = sha(f"{pull.thread_id}:2")
        world.push(REPO, pull.branch, newer, by_agent=True)
        world.fail(pull.head_sha, "tests")

        await world.controller.handle(world.check_run_event(pull))

        assert rules(await world.decisions(pull.thread_id)) == [("skip", "stale_revision")]

    async def test_autofix_off_for_the_owner_or_the_repository_is_skipped_without_asking_github(
        self, world: World
    ) -> None:
        pull = await world.agent_pull(owner_flag=False)
        world.fail(pull.head_sha, "tests")
        before = len(world.github.requests)

        await world.controller.handle(world.check_run_event(pull))

        assert world.github.requests[before:] == []
        (decision,) = await world.decisions(pull.thread_id)
        assert (decision["outcome"], decision["rule"]) == ("skip", "disabled")
        assert "owner's autofix setting is off" in str(decision["reason"])

    async def test_a_thread_without_owner_needs_an_override(self, world: World) -> None:
        pull = await world.agent_pull(owner=None)
        world.fail(pull.head_sha, "tests")
        await world.controller.handle(world.check_run_event(pull))
        assert rules(await world.decisions(pull.thread_id)) == [("skip", "disabled")]

        await world.controller.overrides.set(
            "github.com", REPO, pull.number, OverrideState.ON, by="ada", source=OverrideSource.DASHBOARD
        )
        await world.controller.handle(world.check_run_event(pull))
        assert rules(await world.decisions(pull.thread_id))[-1] == ("dispatch", "repair")


class TestCoalescing:
    async def test_a_failure_during_an_active_repair_waits_and_is_decided_when_its_run_ends(self, world: World) -> None:
        pull = await world.agent_pull()
        await dispatched(world, pull)
        repair = await world.controller.repairs.active(pull.thread_id)
        assert repair is not None
        newer = sha(f"{pull.thread_id}:2")
        world.push(REPO, pull.branch, newer, by_agent=True)
        world.fail(newer, "tests")
        for name in ("tests", "lint"):
            await world.controller.handle(world.check_run_event(pull, name, head=newer))
        assert len(await world.inbox(pull.thread_id)) == 1
        assert rules(await world.decisions(pull.thread_id))[1:] == [("coalesce", "repair_active")] * 2

        claimed = await world.controller.repairs.report(pull.thread_id, "run-1", 0.9, "fixed")
        assert claimed is not None
        assert claimed.claimed_at is not None
        ended = RunEvent(thread_id=pull.thread_id, run_id="run-1", type=EventType.COMPLETED)
        await world.controller.run_ended(ended)

        inbox = await world.inbox(pull.thread_id)
        assert len(inbox) == 2
        assert inbox[1].references["head_sha"] == newer
        assert inbox[1].references["attempt"] == "2"
        assert await world.controller.repairs.pending(pull.thread_id) == {}

    async def test_an_ending_before_the_claim_does_not_end_the_repair(self, world: World) -> None:
        pull = await world.agent_pull()
        await dispatched(world, pull)
        earlier = RunEvent(thread_id=pull.thread_id, run_id="run-0", type=EventType.COMPLETED)
        await world.controller.run_ended(earlier)
        assert await world.controller.repairs.active(pull.thread_id) is not None


class TestLoopLimit:
    async def test_the_limit_stops_autofix_with_one_pull_request_comment_and_a_neutral_check(
        self, world: World
    ) -> None:
        pull = await world.agent_pull()
        head = pull.head_sha
        for attempt in range(1, 4):
            world.fail(head, "tests")
            await world.controller.handle(world.check_run_event(pull, head=head))
            repair = await world.controller.repairs.active(pull.thread_id)
            assert repair is not None
            assert repair.attempt == attempt
            await world.controller.repairs.finish(pull.thread_id, repair.id)
            head = sha(f"{pull.thread_id}:{attempt + 1}")
            world.push(REPO, pull.branch, head, by_agent=True)

        world.fail(head, "tests")
        for _ in range(2):
            await world.controller.handle(world.check_run_event(pull, head=head))

        assert len(await world.inbox(pull.thread_id)) == 3
        assert rules(await world.decisions(pull.thread_id))[-2:] == [("stop", "loop_limit")] * 2
        comments = activity_of(world.github.state).comments_on(REPO, pull.number)
        (notice,) = [c for c in comments if c.login == "drydock[bot]"]
        assert "Autofix stopped" in notice.body
        assert "@drydock autofix on" in notice.body
        checks = [run for run in world.history.check_runs(REPO, head) if run.name == "Drydock autofix"]
        assert [(run.conclusion, run.output["title"]) for run in checks] == [
            ("neutral", "Autofix stopped: loop limit reached")
        ]


class TestOverrides:
    async def command(self, world: World, pull: AgentPull, body: str, login: str) -> None:
        comment = activity_of(world.github.state).add_comment(REPO, pull.number, body, login=login)
        payload = hooks.issue_comment(
            ORG, NAME, pull.number, body, author=hooks.user(login), pull_request=True, comment_id=comment.id
        )
        await world.controller.handle(event("issue_comment", payload))

    async def test_a_writer_turns_autofix_off_for_one_pull_request(self, world: World) -> None:
        pull = await world.agent_pull()
        await self.command(world, pull, "@drydock autofix off", WRITER)
        override = await world.controller.overrides.get("github.com", REPO, pull.number)
        assert override is not None
        assert (override.state, override.by) == (OverrideState.OFF, WRITER)

        world.fail(pull.head_sha, "tests")
        await world.controller.handle(world.check_run_event(pull))

        assert await world.inbox(pull.thread_id) == []
        decisions = await world.decisions(pull.thread_id)
        assert [decision["outcome"] for decision in decisions] == ["override", "skip"]
        assert "turned off for this pull request" in str(decisions[-1]["reason"])
        comment_reactions = [r for r in activity_of(world.github.state).reactions if r.content == "+1"]
        assert comment_reactions

    async def test_someone_without_write_access_cannot(self, world: World) -> None:
        pull = await world.agent_pull()
        await self.command(world, pull, "@drydock autofix off", READER)
        assert await world.controller.overrides.get("github.com", REPO, pull.number) is None
        bot_comments = [
            c.body for c in activity_of(world.github.state).comments_on(REPO, pull.number) if c.login == "drydock[bot]"
        ]
        assert bot_comments == [
            f"@{READER} only people with write access to {REPO} can turn autofix off for a pull request."
        ]

    async def test_a_label_turns_autofix_on_and_removing_it_turns_the_override_off(self, world: World) -> None:
        pull = await world.agent_pull(repository_flag=False)
        labeled = hooks.labeled(
            ORG, NAME, pull.number, "drydock:autofix", sender=hooks.user(WRITER), head_ref=pull.branch
        )
        await world.controller.handle(event("pull_request", labeled))
        enabled = await world.controller.enablements.of(OWNER_ID, "github.com", REPO, pull.number)
        assert enabled.enabled

        unlabeled = hooks.labeled(
            ORG, NAME, pull.number, "drydock:autofix", action="unlabeled", sender=hooks.user(WRITER),
            head_ref=pull.branch,
        )  # fmt: skip
        await world.controller.handle(event("pull_request", unlabeled))
        enabled = await world.controller.enablements.of(OWNER_ID, "github.com", REPO, pull.number)
        assert not enabled.enabled

    async def test_turning_autofix_on_again_resets_the_loop_count(self, world: World) -> None:
        pull = await world.agent_pull()
        pull_ref = ("github.com", REPO, pull.number)
        await dispatched(world, pull)
        assert (await world.controller.repairs.state(pull.thread_id, pull_ref, "x", Kind.CI)).repairs == 1
        await self.command(world, pull, "@drydock autofix on", WRITER)
        assert (await world.controller.repairs.state(pull.thread_id, pull_ref, "x", Kind.CI)).repairs == 0


class TestReviewsAndConflicts:
    async def test_changes_requested_by_a_writer_get_a_repair_run(self, world: World) -> None:
        pull = await world.agent_pull()
        payload = hooks.review(
            ORG, NAME, pull.number, "Please split this.", author=hooks.user(WRITER), state="changes_requested",
            head_ref=pull.branch, head_sha=pull.head_sha,
        )  # fmt: skip
        await world.controller.handle(event("pull_request_review", payload))
        (message,) = await world.inbox(pull.thread_id)
        assert message.references["trigger"] == "review"
        assert f"{WRITER} requested changes" in message.text

    async def test_review_comments_from_readers_and_bots_are_not_acted_on(self, world: World) -> None:
        pull = await world.agent_pull()
        for author in (hooks.user(READER), hooks.user("renovate[bot]", kind="Bot")):
            payload = hooks.review_comment(
                ORG, NAME, pull.number, "nit", author=author, head_ref=pull.branch, head_sha=pull.head_sha
            )
            await world.controller.handle(event("pull_request_review_comment", payload))
        assert await world.inbox(pull.thread_id) == []
        assert rules(await world.decisions(pull.thread_id)) == [("skip", "not_a_writer")]

    async def test_an_unmergeable_pull_request_gets_a_conflict_repair(self, world: World) -> None:
        pull = await world.agent_pull()
        world.history.set_mergeable(REPO, pull.number, False)
        payload = hooks.pull_request(
            ORG, NAME, pull.number, "synchronize", head_ref=pull.branch, head_sha=pull.head_sha
        )
        payload["pull_request"]["mergeable"] = False
        await world.controller.handle(event("pull_request", payload))
        (message,) = await world.inbox(pull.thread_id)
        assert message.references["trigger"] == "conflict"
        assert f"merge conflicts with `{pull.base}`" in message.text

    async def test_a_closed_pull_request_ends_its_repair_and_is_left_alone(self, world: World) -> None:
        pull = await world.agent_pull()
        await dispatched(world, pull)
        closed = hooks.pull_request(ORG, NAME, pull.number, "closed", head_ref=pull.branch, head_sha=pull.head_sha)
        closed["pull_request"]["state"] = "closed"
        await world.controller.handle(event("pull_request", closed))
        assert await world.controller.repairs.active(pull.thread_id) is None
        record = await world.controller.records.find("github.com", REPO, pull.number)
        assert record is not None
        assert record.state.value == "closed"
        newer = sha(f"{pull.thread_id}:2")
        world.fail(newer, "tests")
        await world.controller.handle(world.check_run_event(pull, head=newer))
        assert rules(await world.decisions(pull.thread_id))[-1] == ("skip", "not_open")
