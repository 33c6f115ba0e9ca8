"""The dashboard on the whole pipeline: a thread started from the UI runs to completion on the
coder worker against the scripted model while its viewer watches the live events; a stop
request ends a run between steps, and the thread carries on with the next message."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import httpx

from drydock.bus import EventType
from tests.e2e.dashboard import dev_sign_in
from tests.e2e.pipeline import REPOSITORY, Stage, pipeline
from tests.fakes.openai_server import Script
from tests.waiting import eventually


async def watch(client: httpx.AsyncClient, thread_id: str, until: set[str]) -> list[dict[str, Any]]:
    """The thread's events from its live stream, up to the first whose type is in ``until``."""
    seen: list[dict[str, Any]] = []
    async with client.stream("GET", f"/api/v1/threads/{thread_id}/events/stream") as answer:
        assert answer.status_code == 200
        async for line in answer.aiter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line.removeprefix("data: ")))
                if seen[-1]["type"] in until:
                    return seen
    raise AssertionError("the stream ended")


async def state(client: httpx.AsyncClient, thread_id: str) -> str | None:
    found: str | None = (await client.get(f"/api/v1/threads/{thread_id}")).json()["state"]
    return found


async def start(stage: Stage, prompt: str) -> tuple[httpx.AsyncClient, str, str]:
    assert stage.dashboard_url is not None
    client, csrf = await dev_sign_in(stage.dashboard_url, "ada")
    answer = await client.post(
        "/api/v1/threads", json={"repository": REPOSITORY, "prompt": prompt}, headers={"X-CSRF-Token": csrf}
    )
    assert answer.status_code == 201, answer.text
    return client, csrf, answer.json()["id"]


class TestFromTheDashboard:
    async def test_a_thread_started_in_the_ui_completes_with_live_events(self, tmp_path: Path) -> None:
        script = (
            Script()
            .tool_call("write_file", file_path="/workspace/widgets/NOTES.md", content="checked\n", latency=0.3)
            .reply("I looked at the repository and wrote notes.")
        )
        async with pipeline(tmp_path, script, dashboard=True) as stage:
            client, _, thread_id = await start(stage, "Take notes on the repository.")
            async with contextlib.aclosing(client):
                seen = await asyncio.wait_for(watch(client, thread_id, {"completed", "error"}), 90)
                assert seen[0]["type"] == "started"
                assert seen[-1]["type"] == "completed", seen
                assert seen[-1]["data"]["summary"] == "I looked at the repository and wrote notes."
                assert await state(client, thread_id) == "idle"
                detail = (await client.get(f"/api/v1/threads/{thread_id}")).json()
                assert detail["changed_files"] == ["NOTES.md"]
                assert detail["changes"]["files"] == [
                    {"path": "NOTES.md", "status": "A", "additions": 1, "deletions": 0}
                ]
                assert "+checked" in detail["changes"]["patch"]
                assert detail["sandbox"]["status"] == "ready"
                page = await client.get(f"/threads/{thread_id}")
                assert "I looked at the repository and wrote notes." in page.text

    async def test_a_stopped_run_ends_between_steps_and_the_thread_goes_on(self, tmp_path: Path) -> None:
        script = (
            Script()
            .tool_call("execute", command="true")
            .tool_call("execute", command="echo second", latency=2.0)
            .reply("Finished after the follow-up.")
        )
        async with pipeline(tmp_path, script, dashboard=True) as stage:
            client, csrf, thread_id = await start(stage, "Run two commands.")
            async with contextlib.aclosing(client):
                watching = asyncio.create_task(watch(client, thread_id, {"stopped", "completed", "error"}))

                async def first_tool_ran() -> bool:
                    return any(event.type is EventType.TOOL_CALL for event in await stage.events(thread_id))

                await eventually(first_tool_ran, within=60, what="the first tool call")
                ran = [event for event in await stage.events(thread_id) if event.type is EventType.TOOL_CALL]
                assert (ran[0].data["name"], ran[0].data["exit_code"]) == ("execute", 0)
                stop = await client.post(f"/api/v1/threads/{thread_id}/stop", headers={"X-CSRF-Token": csrf})
                assert stop.status_code == 202, stop.text
                seen = await asyncio.wait_for(watching, 60)
                assert seen[-1]["type"] == "stopped"
                assert seen[-1]["data"] == {"by": "ada"}
                assert len(stage.model.requests) == 2
                assert await state(client, thread_id) == "stopped"

                follow_up = await client.post(
                    f"/api/v1/threads/{thread_id}/messages", json={"text": "Go on."}, headers={"X-CSRF-Token": csrf}
                )
                assert follow_up.status_code == 202
                ended = await asyncio.wait_for(watch(client, thread_id, {"completed", "error"}), 60)
                assert ended[-1]["type"] == "completed"
                assert ended[-1]["data"]["summary"] == "Finished after the follow-up."

    async def test_a_stop_during_the_first_model_call_ends_the_run_for_good(self, tmp_path: Path) -> None:
        script = (
            Script()
            .tool_call("execute", command="touch /workspace/ran", latency=3.0)
            .reply("This run should have stopped.")
        )
        async with pipeline(tmp_path, script, dashboard=True) as stage:
            client, csrf, thread_id = await start(stage, "Run a command.")
            async with contextlib.aclosing(client):
                watching = asyncio.create_task(watch(client, thread_id, {"stopped", "completed", "error"}))
                await asyncio.wait_for(stage.model.wait_for_requests(1), 60)
                stop = await client.post(f"/api/v1/threads/{thread_id}/stop", headers={"X-CSRF-Token": csrf})
                assert stop.status_code == 202, stop.text
                seen = await asyncio.wait_for(watching, 60)
                assert seen[-1]["type"] == "stopped", seen
                # Long enough for a redelivered wake or an inbox re-check to start a second run.
                await asyncio.sleep(4)
                events = [event.type for event in await stage.events(thread_id)]
                assert events.count(EventType.STARTED) == 1, events
                assert EventType.COMPLETED not in events
                assert EventType.TOOL_CALL not in events
                assert len(stage.model.requests) == 1
                assert await state(client, thread_id) == "stopped"
                detail = (await client.get(f"/api/v1/threads/{thread_id}")).json()
                assert detail["stop_requested"] is False
