"""The reviewer's finding tools: ``add_finding`` anchors in the diff and de-duplicates,
``update_finding`` resolves, dismisses and answers, ``list_findings`` shows them, and
``publish_review`` posts them as one review."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.tools import BaseTool
from redis.asyncio import Redis

from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.infra.redis import Keys
from drydock.review.target import ReviewTargets, fetch_target
from drydock.tools import add_finding, list_findings, publish_review, update_finding
from drydock.tools.context import ToolContext
from tests.fakes.github import webhooks
from tests.fakes.github.activity import activity_of
from tests.fakes.github.reviews import PullFile, reviews_of, set_files
from tests.fakes.github.state import PullRequest
from tests.tools.channel_fixtures import GithubWorld, github_world
from tests.tools.conftest import REPOSITORY, MakeContext

PATCH = "@@ -1,2 +1,6 @@\n def add(a, b):\n     return a - b\n+\n+\n+def div(a, b):\n+    return a / b"
FINDING = {
    "severity": "high",
    "confidence": 0.9,
    "category": "Correctness",
    "title": "Division by zero",
    "path": "calc.py",
    "start_line": 6,
    "description": "`div(a, 0)` raises.",
}


@pytest.fixture
async def github() -> AsyncIterator[GithubWorld]:
    async with github_world() as world:
        github = world.fake.state
        github.pulls[(REPOSITORY, 5)] = PullRequest(
            id=github.next_id(), repository=REPOSITORY, number=5, title="Div", body="", head_ref="feature",
            head_sha="a" * 40, base_ref="main", draft=False, user=webhooks.user("octocat"),
        )  # fmt: skip
        activity_of(github).open_issue(REPOSITORY, 5, pull_request=True)
        set_files(github, REPOSITORY, 5, [PullFile("calc.py", additions=4, patch=PATCH)])
        yield world


@pytest.fixture
async def outbound(settings: Settings, github: GithubWorld) -> AsyncIterator[Outbound]:
    clients = Outbound.from_settings(github.settings(settings))
    yield clients
    await clients.aclose()


@pytest.fixture
async def context(
    make_context: MakeContext, settings: Settings, github: GithubWorld, outbound: Outbound, redis: Redis, keys: Keys
) -> ToolContext:
    context = make_context(github.settings(settings), outbound=outbound)
    assert outbound.github is not None
    authorization = f"token {await outbound.github.installation_token(github.installation.id)}"
    target = await fetch_target(outbound.github, authorization, REPOSITORY, 5)
    await ReviewTargets(redis, keys).save(context.scope.thread_id, target)
    return context


async def call(tool: BaseTool, **arguments: Any) -> Any:
    return await tool.ainvoke(arguments)


class TestAddFinding:
    async def test_a_finding_on_the_diff_is_recorded(self, context: ToolContext) -> None:
        answer = await call(add_finding.build(context), **FINDING)
        assert answer == {"id": "F1", "created": True, "status": "open"}
        listed = await call(list_findings.build(context))
        assert listed["pull_request"] == 5
        assert [(f["id"], f["category"], f["where"], f["posted"]) for f in listed["findings"]] == [
            ("F1", "correctness", "calc.py:6 (RIGHT)", False)
        ]

    async def test_a_line_outside_the_diff_is_answered_with_the_commentable_lines(self, context: ToolContext) -> None:
        answer = await call(add_finding.build(context), **(FINDING | {"start_line": 30}))
        assert "calc.py line 30 (RIGHT) is not in the pull request's diff" in answer
        assert "commentable on RIGHT: 1-6" in answer

    async def test_the_same_problem_twice_is_confirmed_not_added(self, context: ToolContext) -> None:
        tool = add_finding.build(context)
        await call(tool, **FINDING)
        again = await call(tool, **FINDING)
        assert again["id"] == "F1"
        assert not again["created"]
        assert "already records this problem" in again["note"]

    async def test_a_thread_without_a_review_target_is_refused(self, make_context: MakeContext) -> None:
        answer = await call(add_finding.build(make_context()), **FINDING)
        assert answer == "This thread is not reviewing a pull request."


class TestUpdateFinding:
    async def test_resolving_with_a_note(self, context: ToolContext) -> None:
        await call(add_finding.build(context), **FINDING)
        answer = await call(update_finding.build(context), id="F1", status="resolved", note="Guarded now.")
        assert (answer["status"], answer["note"], answer["closed_by"]) == ("resolved", "Guarded now.", "reviewer")

    async def test_dismissing_for_a_person(self, context: ToolContext) -> None:
        await call(add_finding.build(context), **FINDING)
        answer = await call(
            update_finding.build(context), id="F1", status="dismissed", note="b is never 0", requested_by="carol"
        )
        assert answer["closed_by"] == "carol"

    async def test_the_text_of_a_posted_finding_cannot_change(self, context: ToolContext) -> None:
        await call(add_finding.build(context), **FINDING)
        await call(publish_review.build(context), summary="One problem.")
        answer = await call(update_finding.build(context), id="F1", description="Other words.")
        assert "already posted on GitHub" in answer
        replied = await call(update_finding.build(context), id="F1", note="It still applies.")
        assert replied["reply_to_post"] == "It still applies."

    async def test_an_unknown_finding_and_an_empty_change_are_refused(self, context: ToolContext) -> None:
        assert "no finding F4" in await call(update_finding.build(context), id="F4", status="resolved")
        await call(add_finding.build(context), **FINDING)
        assert (await call(update_finding.build(context), id="F1")).startswith("Nothing to change")


class TestPublishReview:
    async def test_the_findings_are_posted_as_one_review_and_twice_posts_once(
        self, context: ToolContext, github: GithubWorld
    ) -> None:
        await call(add_finding.build(context), **FINDING)
        tool = publish_review.build(context)
        first = await call(tool, summary="One problem.")
        assert first["posted"] == ["F1"]
        assert first["review_url"].startswith("https://github.com/acme/widgets/pull/5#pullrequestreview-")
        second = await call(tool, summary="One problem.")
        assert second["note"].startswith("Nothing new to publish")
        assert len(reviews_of(github.fake.state).reviews) == 1

    async def test_the_severity_threshold_comes_from_the_settings(
        self,
        make_context: MakeContext,
        settings: Settings,
        github: GithubWorld,
        outbound: Outbound,
        context: ToolContext,
    ) -> None:
        strict = github.settings(settings).model_copy(
            update={"review": settings.review.model_copy(update={"min_severity": "critical"})}
        )
        await call(add_finding.build(context), **FINDING)
        answer = await call(publish_review.build(make_context(strict, outbound=outbound)))
        assert (answer["posted"], answer["not_posted_inline"]) == ([], ["F1"])
