"""Scenarios 7 and 8, and a thread without a configured model: the fallback model takes over a
failing endpoint; without one the source gets a clear failure notice; an empty reply becomes a
synthetic tool call; the step limit ends a run with a notice."""

from __future__ import annotations

from pathlib import Path

from drydock.bus import EventType
from drydock.threads import ids
from drydock.worker.agent_runs import NO_MODEL_NOTICE
from tests.e2e.pipeline import MEMBER, ORG, REPOSITORY, Stage, pipeline
from tests.e2e.test_github_issue import ISSUE, mention
from tests.fakes.github.activity import activity_of
from tests.fakes.openai_server import Script
from tests.waiting import eventually

THREAD = ids.github_issue("github.com", ORG, "widgets", ISSUE)


async def ended_with(stage: Stage, kind: EventType) -> bool:
    return any(event.type is kind for event in await stage.events(THREAD))


def agent_comments(stage: Stage) -> list[str]:
    return [c.rendered for c in activity_of(stage.github.state).comments_on(REPOSITORY, ISSUE) if c.login != MEMBER]


class TestModelFailures:
    async def test_the_fallback_model_answers_when_the_primary_fails(self, tmp_path: Path) -> None:
        primary = Script().fail(500).fail(500)
        fallback = Script().tool_call("github_comment", body="Answered by the fallback.").reply("Done.")
        async with pipeline(
            tmp_path, scripts={"gpt-5.1": primary, "gpt-4.1": fallback}, models={"fallback": "gpt-4.1"}
        ) as stage:
            await stage.deliver_github("issue_comment", mention(stage, "@drydock hello"))
            await eventually(lambda: ended_with(stage, EventType.COMPLETED), within=60, what="completion")

            assert agent_comments(stage) == ["Answered by the fallback."]
            assert [request.model for request in stage.model.requests] == ["gpt-5.1", "gpt-4.1", "gpt-5.1", "gpt-4.1"]

    async def test_without_a_fallback_the_source_gets_a_failure_notice(self, tmp_path: Path) -> None:
        async with pipeline(tmp_path, Script().fail(503)) as stage:
            await stage.deliver_github("issue_comment", mention(stage, "@drydock hello"))
            await eventually(lambda: ended_with(stage, EventType.ERROR), within=60, what="the error event")

            notices = agent_comments(stage)
            assert len(notices) == 1
            assert "the model failed" in notices[0]
            assert "503" in notices[0]
            assert len(stage.model.requests) == 1

    async def test_an_empty_reply_becomes_a_synthetic_tool_call(self, tmp_path: Path) -> None:
        script = Script().empty().tool_call("github_comment", body="Done after the nudge.").reply("Done.")
        async with pipeline(tmp_path, script) as stage:
            await stage.deliver_github("issue_comment", mention(stage, "@drydock hello"))
            await eventually(lambda: ended_with(stage, EventType.COMPLETED), within=60, what="completion")

            nudge = stage.model.requests[1].messages[-1]
            assert nudge["role"] == "tool"
            assert "empty" in nudge["content"]
            assert agent_comments(stage) == ["Done after the nudge."]


class TestStepLimit:
    async def test_the_step_limit_ends_the_run_with_a_notice(self, tmp_path: Path) -> None:
        script = Script().tool_call("execute", command="true").tool_call("execute", command="true")
        async with pipeline(tmp_path, script, worker={"step_limit": 2}) as stage:
            await stage.deliver_github("issue_comment", mention(stage, "@drydock loop"))
            await eventually(lambda: ended_with(stage, EventType.STEP_LIMIT), within=60, what="the step limit")

            assert len(stage.model.requests) == 2
            # The stop message stands in for a third model call; it is not published as one.
            model_calls = [event for event in await stage.events(THREAD) if event.type is EventType.MODEL_CALL]
            assert len(model_calls) == 2
            notices = agent_comments(stage)
            assert len(notices) == 1
            assert "step limit" in notices[0]


class TestNoModel:
    async def test_a_thread_is_told_that_no_model_is_configured(self, tmp_path: Path) -> None:
        async with pipeline(tmp_path, model_configured=False) as stage:
            await stage.deliver_github("issue_comment", mention(stage, "@drydock hello"))
            await eventually(lambda: ended_with(stage, EventType.ERROR), within=60, what="the error event")

            assert agent_comments(stage) == [NO_MODEL_NOTICE]
            assert stage.model.requests == []
