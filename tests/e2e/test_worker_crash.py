"""Scenario 6: a worker process killed with SIGKILL in the middle of a run; another worker
process resumes the thread from its checkpoint. Exactly one pull request; every inbox message
reaches the model exactly once."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from drydock.bus import EventType
from drydock.threads import ids
from tests.e2e.pipeline import ORG, REPOSITORY, Stage, pipeline
from tests.e2e.test_github_issue import BRANCH, FIX, ISSUE, mention
from tests.fakes.openai_server import Script
from tests.waiting import eventually

THREAD = ids.github_issue("github.com", ORG, "widgets", ISSUE)


async def completed(stage: Stage) -> bool:
    return any(event.type is EventType.COMPLETED for event in await stage.events(THREAD))


class TestWorkerCrash:
    async def test_another_worker_resumes_from_the_checkpoint_after_a_sigkill(self, tmp_path: Path) -> None:
        script = (
            Script()
            .tool_call("execute", command=FIX)
            # The answer the killed worker never receives.
            .tool_call("open_pull_request", title="Fix add()", head=BRANCH, latency=120)
            .tool_call("open_pull_request", title="Fix add()", body="Fixes #7.", head=BRANCH)
            .tool_call("github_comment", body="Opened the pull request.")
            .reply("Done.")
        )
        async with pipeline(tmp_path, script, in_process_worker=False) as stage:
            first = await stage.start_worker_process(name="first")
            await stage.deliver_github("issue_comment", mention(stage, "@drydock please fix add()"))
            async with asyncio.timeout(60):
                await stage.model.wait_for_requests(2)
            first.send_signal(signal.SIGKILL)
            await first.wait()

            await stage.deliver_github("issue_comment", mention(stage, "@drydock and mention the issue in the PR"))
            await stage.start_worker_process(name="second")
            await eventually(lambda: completed(stage), within=90, what="the resumed run to complete")

            assert len(stage.github.state.pulls_of(REPOSITORY)) == 1
            conversation = stage.model.requests[-1].texts("user")
            assert sum("please fix add()" in text for text in conversation) == 1
            assert sum("mention the issue in the PR" in text for text in conversation) == 1
            # The resumed run did not repeat the work done before the crash.
            executes = [
                m for m in stage.model.requests[-1].messages if m["role"] == "tool" and "Drydock" in m["content"]
            ]
            assert len(executes) == 1
            assert len(stage.model.requests) == 5
