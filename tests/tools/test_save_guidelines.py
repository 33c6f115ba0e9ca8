"""``save_guidelines``: rules must cite the run's evidence; a version records its provenance; a
bootstrap's save finishes it and schedules the continual refinement once; a continual save
moves the cursor; identical rules add no version."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from drydock.config import Settings
from drydock.infra.redis import Keys
from drydock.review.analysis import (
    AnalysisProgress,
    BootstrapState,
    Evidence,
    EvidenceItem,
    EvidenceStore,
    continual_schedule_id,
)
from drydock.review.guidelines import GuidelinesStore
from drydock.scheduler import Schedules
from drydock.tools import save_guidelines
from drydock.tools.context import ToolContext
from tests.tools.conftest import REPOSITORY, MakeContext

COMMENT = EvidenceItem(
    id="C41", kind="review_comment", pull_request=3, comment_id=41, author="carol", body="Use a with block."
)
OTHER = EvidenceItem(id="C42", kind="review_comment", pull_request=4, comment_id=42, author="dan", body="Same here.")
FINDING = EvidenceItem(
    id="P9.F1", kind="finding", pull_request=9, finding_id="F1", status="dismissed", note="generators close"
)
RULE = {"text": "Close files with a context manager.", "category": "Resources", "sources": ["C41", "C42"]}


@pytest.fixture
def context(make_context: MakeContext) -> ToolContext:
    return make_context()


async def evidence(redis: Redis, keys: Keys, context: ToolContext, mode: str, *items: EvidenceItem) -> None:
    current = await GuidelinesStore(redis, keys, host="github.com").latest(REPOSITORY)
    found = Evidence.model_validate(
        {"repository": REPOSITORY, "mode": mode, "items": list(items), "pull_requests": 2, "current": current}
    )
    await EvidenceStore(redis, keys).save(context.scope.thread_id, found)


async def save(context: ToolContext, *rules: dict[str, Any], summary: str = "Learned.") -> Any:
    return await save_guidelines.build(context).ainvoke({"rules": list(rules), "summary": summary})


class TestBootstrap:
    async def test_a_bootstrap_save_writes_v1_with_provenance_and_schedules_refinement_once(
        self, context: ToolContext, redis: Redis, keys: Keys, settings: Settings
    ) -> None:
        schedules = Schedules(redis, keys)
        await evidence(redis, keys, context, "bootstrap", COMMENT, OTHER)
        answer = await save(context, RULE)
        assert answer == {"version": 1, "created": True, "rules": 1, "continual_refinement": "scheduled"}
        version = await GuidelinesStore(redis, keys, host="github.com").latest(REPOSITORY)
        assert version is not None
        rule = version.rules[0]
        assert rule.category == "resources"
        assert [(s.pull_request, s.comment_id, s.author) for s in rule.sources] == [(3, 41, "carol"), (4, 42, "dan")]
        assert version.provenance.mode == "bootstrap"
        assert version.provenance.thread_id == context.scope.thread_id
        assert version.provenance.evidence == {"pull_requests": 2, "review_comments": 2, "findings": 0}
        assert await AnalysisProgress(redis, keys, host="github.com").bootstrap_state(REPOSITORY) is BootstrapState.DONE
        schedule = await schedules.get(continual_schedule_id("github.com", REPOSITORY))
        assert schedule is not None
        assert schedule.every == settings.review.refine_interval

        again = await save(context, RULE | {"text": "Close files and sockets with a context manager."})
        assert (again["version"], again["continual_refinement"]) == (2, "already scheduled")
        assert len(await schedules.all()) == 1

    async def test_unknown_sources_are_refused_and_nothing_is_saved(
        self, context: ToolContext, redis: Redis, keys: Keys
    ) -> None:
        await evidence(redis, keys, context, "bootstrap", COMMENT)
        answer = await save(context, RULE)
        assert answer.startswith("Unknown sources C42")
        assert await GuidelinesStore(redis, keys, host="github.com").history(REPOSITORY) == []
        assert await Schedules(redis, keys).all() == []

    async def test_a_run_without_evidence_saves_nothing(self, context: ToolContext) -> None:
        assert (await save(context, RULE)).startswith("This run has no evidence")


class TestContinual:
    async def test_a_continual_save_may_carry_the_current_rules_sources_and_moves_the_cursor(
        self, context: ToolContext, redis: Redis, keys: Keys
    ) -> None:
        await evidence(redis, keys, context, "bootstrap", COMMENT, OTHER)
        await save(context, RULE)
        await evidence(redis, keys, context, "continual", FINDING)
        answer = await save(context, RULE | {"sources": ["C41", "P9.F1"]}, summary="Generators are fine.")
        assert (answer["version"], answer["created"]) == (2, True)
        v2 = await GuidelinesStore(redis, keys, host="github.com").latest(REPOSITORY)
        assert v2 is not None
        assert (v2.provenance.mode, v2.provenance.based_on) == ("continual", 1)
        assert [s.kind for s in v2.rules[0].sources] == ["review_comment", "finding"]
        assert await AnalysisProgress(redis, keys, host="github.com").refined_until(REPOSITORY) > 0

    async def test_identical_rules_add_no_version(self, context: ToolContext, redis: Redis, keys: Keys) -> None:
        await evidence(redis, keys, context, "bootstrap", COMMENT, OTHER)
        await save(context, RULE)
        await evidence(redis, keys, context, "continual", FINDING)
        answer = await save(context, RULE, summary="Nothing to change.")
        assert (answer["version"], answer["created"]) == (1, False)
