"""What an operator reads and what the agent wakes for: the INFO log of one run tells its story
with the thread id, and an issue comment without a mention waits in the inbox as context."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from drydock.bus import EventType
from drydock.threads import ids
from tests.e2e.pipeline import ORG, pipeline
from tests.e2e.test_github_issue import ISSUE, completed, mention
from tests.fakes.openai_server import Script
from tests.waiting import eventually

QUIET = 5.0
"""How long the thread must stay asleep after a comment without a mention."""
THREAD = ids.github_issue("github.com", ORG, "widgets", ISSUE)


def story_of(logs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [entry for entry in logs if entry.get("thread_id") == THREAD and entry["log_level"] == "info"]


class TestStory:
    async def test_one_run_logs_each_step_in_order_with_the_thread_id(self, tmp_path: Path) -> None:
        script = (
            Script()
            .tool_call("execute", command="echo hello-from-the-sandbox")
            .tool_call("github_comment", body="Said hello.")
            .reply("Done.")
        )
        with capture_logs() as logs:
            async with pipeline(tmp_path, script) as stage:
                response = await stage.deliver_github("issue_comment", mention(stage, "@drydock say hello"))
                assert response.status_code == 200, response.text
                await eventually(lambda: completed(stage, THREAD), within=60, what="the run to complete")
        story = story_of(logs)
        events = [entry["event"] for entry in story]
        expected = [
            "webhook accepted and routed",
            "run started",
            "model call",
            "tool call",
            "model call",
            "tool call",
            "model call",
            "run completed",
        ]
        steps = [event for event in events if event in set(expected) | {"posted"}]
        assert [event for event in steps if event != "posted"] == expected, events
        # The comment is posted during the second tool call, before its result is logged.
        assert steps.index("posted") == expected.index("tool call", 5)
        routed = story[0]
        assert (routed["role"], routed["trigger"], routed["wakes"], routed["new_thread"]) == (
            "coder",
            "mention",
            True,
            True,
        )
        started = next(entry for entry in story if entry["event"] == "run started")
        assert started["model"]
        first_model_call = next(entry for entry in story if entry["event"] == "model call")
        assert first_model_call["input_tokens"] is not None
        assert first_model_call["seconds"] >= 0
        execute = next(entry for entry in story if entry["event"] == "tool call")
        assert execute["tool"] == "execute"
        assert "hello-from-the-sandbox" in execute["arguments"]
        assert (execute["outcome"], execute["exit_code"]) == ("success", 0)
        # Request lines of httpx are not part of the story.
        assert not [entry for entry in logs if entry.get("log_level") == "info" and "HTTP Request" in entry["event"]]


class TestUnmentionedComments:
    async def test_a_comment_without_a_mention_waits_for_the_next_mention(self, tmp_path: Path) -> None:
        script = Script().reply("First answer.").reply("Second answer.")
        async with pipeline(tmp_path, script) as stage:
            await stage.deliver_github("issue_comment", mention(stage, "@drydock look at add()"))
            await eventually(lambda: completed(stage, THREAD), within=60, what="the first run")
            before = await stage.inbox_size(THREAD)
            response = await stage.deliver_github("issue_comment", mention(stage, "Note: add() is also used by mul()"))
            assert response.status_code == 200, response.text
            assert await stage.inbox_size(THREAD) == before + 1
            # Long enough for a woken worker to start a run (the first one started in well under this).
            await asyncio.sleep(QUIET)
            quiet = await stage.events(THREAD)
            assert sum(event.type is EventType.STARTED for event in quiet) == 1, [(e.type, e.data) for e in quiet]
            await stage.deliver_github("issue_comment", mention(stage, "@drydock now fix it"))
            await eventually(lambda: completed(stage, THREAD, runs=2), within=60, what="the second run")
            events = await stage.events(THREAD)
            assert sum(event.type is EventType.STARTED for event in events) == 2
            seen = "\n".join(stage.model.requests[-1].texts("user"))
            assert "add() is also used by mul()" in seen
            assert "now fix it" in seen
