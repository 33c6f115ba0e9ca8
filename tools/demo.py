"""``pdm run demo``: the whole path from a GitHub mention to a pull request, on this machine,
with no accounts. The real ingress, credential proxy and coder worker run on embedded NATS and
Valkey with a local sandbox and real git; GitHub and the model are the test doubles of
``tests/fakes`` playing a scripted scenario. Each step is printed with its time since the
webhook was sent.

``--dashboard`` serves the dashboard too and, after the scenario, keeps everything running until
Ctrl-C, printing a one-time link that signs in (the development login) and opens the thread.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile
import time
from pathlib import Path

import structlog
import uvloop

from drydock.bus import EventType, RunEvent, subjects
from drydock.bus.streams import EVENTS_STREAM
from drydock.threads import ids
from drydock.threads.pr_records import PullRequestStore
from services.dashboard.auth.dev_links import create_dev_link
from tests.e2e.pipeline import ORG, REPOSITORY, Stage, pipeline
from tests.e2e.test_github_issue import BRANCH, ISSUE, fix_script, mention

TIMEOUT = 120.0


class Steps:
    def __init__(self) -> None:
        self.started = time.monotonic()

    def show(self, what: str) -> None:
        print(f"  {(time.monotonic() - self.started) * 1000:8.0f} ms  {what}", flush=True)


def describe(event: RunEvent) -> str | None:
    data = event.data
    match event.type:
        case EventType.STARTED:
            return f"sandbox {data.get('sandbox_id')} ready; agent started on {data.get('model')}"
        case EventType.MODEL_CALL:
            calls = [
                f"{name} {arguments}" for name, arguments in zip(data["tool_calls"], data["arguments"], strict=True)
            ]
            return "model called " + "; ".join(calls) if calls else "model answered: " + str(data.get("text", ""))
        case EventType.TOOL_CALL if data.get("name") == "execute":
            lines = [line for line in str(data.get("output", "")).splitlines() if line.strip() and line[0] != "["]
            last = lines[-1] if lines else ""
            return f"command ran in the sandbox ({data.get('status')}), last line: {last[:100]}"
        case EventType.TOOL_CALL:
            return f"tool {data.get('name')} ({data.get('status')})"
        case EventType.MESSAGE_POSTED:
            return f"posted to {data.get('channel', 'the source')}: {data.get('url') or data.get('target') or ''}"
        case EventType.COMPLETED:
            return "run completed"
        case _:
            return f"{event.type.value}: {data}"


async def follow(stage: Stage, thread_id: str, steps: Steps) -> None:
    subscription = await stage.runtime.bus.js.subscribe(
        subjects.events_of(thread_id), stream=EVENTS_STREAM, ordered_consumer=True
    )
    try:
        async for message in subscription.messages:
            event = RunEvent.model_validate_json(message.data)
            line = describe(event)
            if line:
                steps.show(line)
            if event.type in {EventType.COMPLETED, EventType.ERROR, EventType.STEP_LIMIT}:
                return
    finally:
        await subscription.unsubscribe()


async def until_interrupted() -> None:
    """Return on SIGINT (Ctrl-C) or SIGTERM, so that the stack stops in order."""
    loop = asyncio.get_running_loop()
    interrupted = asyncio.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, interrupted.set)
    try:
        await interrupted.wait()
    finally:
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(number)


async def keep_serving(stage: Stage, thread_id: str) -> None:
    assert stage.dashboard_url is not None
    path = await create_dev_link(
        stage.runtime.redis, stage.runtime.keys, login="demo", admin=True, target=f"/threads/{thread_id}"
    )
    print(f"\nDashboard: {stage.dashboard_url}")
    print(f"Open the thread, signed in as the administrator `demo` (the link works once): {stage.dashboard_url}{path}")
    print("Everything keeps running; Ctrl-C stops it.", flush=True)
    await until_interrupted()
    print("stopping…", flush=True)


async def demo(root: Path, *, dashboard: bool = False) -> int:
    print("Starting embedded NATS and Valkey, the fakes of GitHub and the model, the ingress,")
    print("the credential proxy and the coder worker…", flush=True)
    async with pipeline(root, fix_script(), dashboard=dashboard) as stage:
        thread_id = ids.github_issue("github.com", ORG, "widgets", ISSUE)
        print(f"\n@octocat on {REPOSITORY}#{ISSUE}: “@drydock please fix add()”\n")
        steps = Steps()
        following = asyncio.create_task(follow(stage, thread_id, steps))
        response = await stage.deliver_github("issue_comment", mention(stage, "@drydock please fix add()"))
        steps.show(f"webhook accepted: HTTP {response.status_code}; thread {thread_id}")
        try:
            await asyncio.wait_for(following, TIMEOUT)
        except TimeoutError:
            print(f"the run did not finish within {TIMEOUT:.0f} s", file=sys.stderr)
            return 1
        pulls = stage.github.state.pulls_of(REPOSITORY)
        record = (
            await PullRequestStore(stage.runtime.redis, stage.runtime.keys).find(
                "github.com", REPOSITORY, pulls[0].number
            )
            if pulls
            else None
        )
        print()
        if pulls:
            pull = pulls[0]
            print(
                f"Pull request #{pull.number} “{pull.title}” from {BRANCH}; linked to the thread: {record is not None}"
            )
        for request_number, request in enumerate(stage.model.requests, 1):
            messages, tools = len(request.messages), len(request.tool_names)
            print(f"model request {request_number}: {messages} messages, {tools} tools offered")
        if dashboard:
            await keep_serving(stage, thread_id)
        return 0 if pulls else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pdm run demo", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--dashboard",
        action="store_true",
        help="serve the dashboard too and keep everything running after the scenario, until Ctrl-C",
    )
    arguments = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    with tempfile.TemporaryDirectory(prefix="drydock-demo-") as scratch:
        return uvloop.run(demo(Path(scratch), dashboard=arguments.dashboard))


if __name__ == "__main__":
    raise SystemExit(main())
