"""The fallback monitor: it finds through the GitHub API what missed webhooks would have said."""

from __future__ import annotations

from drydock.autofix.monitor import Monitor
from drydock.autofix.policy import Outcome
from drydock.threads.pr_records import PullRequestState
from tests.autofix.conftest import REPO, World, sha


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
