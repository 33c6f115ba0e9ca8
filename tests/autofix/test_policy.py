"""The autofix policy, exhaustively: every skip rule, the enablement truth table, and the order
the rules apply in."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from drydock.autofix.policy import (
    Decision,
    Kind,
    LocalFacts,
    Outcome,
    OverrideState,
    RemoteFacts,
    Rule,
    Signal,
    Source,
    decide,
    enablement,
    judge,
    new_failures,
    screen,
)

HEAD, OLDER = "a" * 40, "b" * 40
ON = enablement(user=True, repository=True, override=None)
CI = Signal(Kind.CI, HEAD, Source.WEBHOOK, "d1", checks=("tests",))
CONFLICT = Signal(Kind.CONFLICT, HEAD, Source.WEBHOOK, "d2")
REVIEW = Signal(Kind.REVIEW, HEAD, Source.WEBHOOK, "d3", actor="maintainer")
LOCAL = LocalFacts(open=True, enablement=ON, processed=False, repair_active=False, repairs=0, max_repairs=3)
REMOTE = RemoteFacts(
    open=True,
    head_sha=HEAD,
    head_by_agent=True,
    head_failures=frozenset({"tests"}),
    base_failures=frozenset(),
    mergeable=False,
    actor_can_write=True,
)


def rule(decision: Decision | None) -> tuple[Outcome, Rule] | None:
    return None if decision is None else (decision.outcome, decision.rule)


class TestEnablement:
    @pytest.mark.parametrize(
        ("user", "repository", "override", "enabled"),
        [
            (user, repository, override, override is OverrideState.ON or (override is None and user and repository))
            for user, repository, override in itertools.product(
                (False, True), (False, True), (None, OverrideState.ON, OverrideState.OFF)
            )
        ],
    )
    def test_truth_table(self, user: bool, repository: bool, override: OverrideState | None, enabled: bool) -> None:
        found = enablement(user=user, repository=repository, override=override)
        assert found.enabled is enabled
        assert (found.user, found.repository, found.override) == (user, repository, override)

    def test_the_reason_names_what_is_off(self) -> None:
        assert enablement(user=False, repository=True, override=None).reason == "the owner's autofix setting is off"
        assert enablement(user=True, repository=False, override=None).reason == (
            "the repository's autofix opt-in is off"
        )
        both = enablement(user=False, repository=False, override=None).reason
        assert both == "the owner's autofix setting and the repository's autofix opt-in are off"
        assert enablement(user=False, repository=False, override=OverrideState.ON).reason == (
            "turned on for this pull request"
        )
        assert enablement(user=True, repository=True, override=OverrideState.OFF).reason == (
            "turned off for this pull request"
        )


class TestScreen:
    def test_a_closed_pull_request_is_skipped(self) -> None:
        assert rule(screen(CI, replace(LOCAL, open=False))) == (Outcome.SKIP, Rule.NOT_OPEN)

    def test_autofix_off_is_skipped_with_the_reason(self) -> None:
        off = replace(LOCAL, enablement=enablement(user=True, repository=False, override=None))
        decision = screen(CI, off)
        assert rule(decision) == (Outcome.SKIP, Rule.DISABLED)
        assert decision is not None
        assert "repository's autofix opt-in is off" in decision.reason

    def test_a_revision_already_processed_for_the_same_trigger_is_skipped(self) -> None:
        assert rule(screen(CI, replace(LOCAL, processed=True))) == (Outcome.SKIP, Rule.ALREADY_PROCESSED)

    def test_an_active_repair_coalesces(self) -> None:
        assert rule(screen(CI, replace(LOCAL, repair_active=True))) == (Outcome.COALESCE, Rule.REPAIR_ACTIVE)

    def test_the_loop_limit_stops(self) -> None:
        assert rule(screen(CI, replace(LOCAL, repairs=3))) == (Outcome.STOP, Rule.LOOP_LIMIT)
        assert screen(CI, replace(LOCAL, repairs=2)) is None

    def test_nothing_local_decides_a_fresh_signal(self) -> None:
        for signal in (CI, CONFLICT, REVIEW):
            assert screen(signal, LOCAL) is None

    def test_rules_apply_in_order(self) -> None:
        everything = replace(
            LOCAL,
            open=False,
            enablement=enablement(user=False, repository=False, override=None),
            processed=True,
            repair_active=True,
            repairs=9,
        )
        expected = [Rule.NOT_OPEN, Rule.DISABLED, Rule.ALREADY_PROCESSED, Rule.REPAIR_ACTIVE, Rule.LOOP_LIMIT]
        facts = everything
        for want, fix in zip(
            expected,
            [{"open": True}, {"enablement": ON}, {"processed": False}, {"repair_active": False}, {"repairs": 0}],
            strict=True,
        ):
            decision = screen(CI, facts)
            assert decision is not None
            assert decision.rule is want
            facts = replace(facts, **fix)  # type: ignore[arg-type]
        assert screen(CI, facts) is None


class TestJudge:
    def test_a_failing_check_of_the_agents_head_is_repaired(self) -> None:
        decision = judge(CI, REMOTE)
        assert rule(decision) == (Outcome.DISPATCH, Rule.REPAIR)
        assert decision.checks == ("tests",)

    def test_a_failure_also_on_the_base_branch_is_skipped(self) -> None:
        on_base = replace(REMOTE, base_failures=frozenset({"tests"}))
        decision = judge(CI, on_base)
        assert rule(decision) == (Outcome.SKIP, Rule.FAILING_ON_BASE)
        assert "tests" in decision.reason

    def test_only_failures_not_on_the_base_are_repaired(self) -> None:
        mixed = replace(REMOTE, head_failures=frozenset({"lint", "tests", "e2e"}), base_failures=frozenset({"e2e"}))
        assert judge(CI, mixed).checks == ("lint", "tests")
        assert new_failures({"a", "b"}, {"b", "c"}) == ("a",)

    def test_a_head_pushed_by_a_person_is_skipped(self) -> None:
        for signal in (CI, CONFLICT, REVIEW):
            assert rule(judge(signal, replace(REMOTE, head_by_agent=False))) == (Outcome.SKIP, Rule.PUSHED_BY_PERSON)

    def test_an_event_about_an_older_revision_is_skipped(self) -> None:
        moved = replace(REMOTE, head_sha=OLDER)
        for signal in (CI, CONFLICT, REVIEW):
            assert rule(judge(signal, moved)) == (Outcome.SKIP, Rule.STALE_REVISION)

    def test_a_pull_request_closed_meanwhile_is_skipped(self) -> None:
        assert rule(judge(CI, replace(REMOTE, open=False))) == (Outcome.SKIP, Rule.NOT_OPEN)

    def test_a_check_passing_again_is_skipped(self) -> None:
        assert rule(judge(CI, replace(REMOTE, head_failures=frozenset()))) == (Outcome.SKIP, Rule.NO_FAILURE)

    def test_a_merge_conflict_is_repaired_only_while_it_exists(self) -> None:
        assert rule(judge(CONFLICT, REMOTE)) == (Outcome.DISPATCH, Rule.REPAIR)
        for mergeable in (True, None):
            assert rule(judge(CONFLICT, replace(REMOTE, mergeable=mergeable))) == (Outcome.SKIP, Rule.NO_CONFLICT)

    def test_review_feedback_counts_only_from_people_with_write_access(self) -> None:
        assert rule(judge(REVIEW, REMOTE)) == (Outcome.DISPATCH, Rule.REPAIR)
        assert rule(judge(REVIEW, replace(REMOTE, actor_can_write=False))) == (Outcome.SKIP, Rule.NOT_A_WRITER)

    def test_the_kinds_do_not_borrow_each_others_facts(self) -> None:
        no_ci_failure = replace(REMOTE, head_failures=frozenset())
        assert rule(judge(CONFLICT, no_ci_failure)) == (Outcome.DISPATCH, Rule.REPAIR)
        assert rule(judge(REVIEW, replace(REMOTE, mergeable=True))) == (Outcome.DISPATCH, Rule.REPAIR)


class TestDecide:
    def test_local_rules_come_first(self) -> None:
        assert rule(decide(CI, replace(LOCAL, repair_active=True), replace(REMOTE, head_sha=OLDER))) == (
            Outcome.COALESCE,
            Rule.REPAIR_ACTIVE,
        )

    def test_otherwise_github_decides(self) -> None:
        assert rule(decide(CI, LOCAL, REMOTE)) == (Outcome.DISPATCH, Rule.REPAIR)
        assert rule(decide(CI, LOCAL, replace(REMOTE, head_by_agent=False))) == (Outcome.SKIP, Rule.PUSHED_BY_PERSON)
