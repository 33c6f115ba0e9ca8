"""The thread page's conversation: messages and runs in one timeline, which message started which
run, tool calls with their arguments and outcome, and each run's usage."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from drydock.usage.ledger import UsageTotals
from services.dashboard.threads.schemas import EventOut, MessageOut
from services.dashboard.threads.timeline import RunUsage, timeline, tool_step

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def message(seq: int, seconds: float, text: str, author: str = "ada") -> MessageOut:
    return MessageOut(seq=seq, author=author, channel="dashboard", text=text, received_at=at(seconds))


class Events:
    def __init__(self) -> None:
        self.events: list[EventOut] = []

    def add(self, run_id: str, moment: float, type: str, **data: object) -> Events:
        self.events.append(EventOut(seq=len(self.events) + 1, type=type, run_id=run_id, at=at(moment), data=data))
        return self


def two_runs() -> tuple[list[MessageOut], list[EventOut]]:
    events = (
        Events()
        .add("r1", 1, "started", model="gpt-5.1")
        .add("r1", 2, "model_call", text="", tool_calls=["execute"], arguments=['{"command": "ls"}'])
        .add("r1", 3, "tool_call", name="execute", status="success", output="calc.py", arguments='{"command": "ls"}')
        .add("r1", 4, "completed", summary="Listed it.")
        .add("r2", 11, "started", model="gpt-5.1")
        .add("r2", 12, "model_call", text="Adding **sub**.", tool_calls=[])
        .add("r2", 14, "completed", summary="Added sub().")
    )
    messages = [message(1, 0, "List the files"), message(2, 10, "Also add sub()"), message(3, 12.5, "and mul()")]
    return messages, events.events


class TestWhichMessageStartedWhichRun:
    def test_messages_between_runs_start_the_next_and_a_message_during_a_run_is_inside_it(self) -> None:
        messages, events = two_runs()
        entries = timeline(messages, events)
        shape = [("message", entry.message.seq) if entry.message else ("run", entry.run.run_id) for entry in entries]  # type: ignore[union-attr]
        assert shape == [("message", 1), ("run", "r1"), ("message", 2), ("run", "r2")]
        first, second = (entry.run for entry in entries if entry.run)
        assert [m.seq for m in first.started_by] == [1]
        assert [m.seq for m in second.started_by] == [2]
        assert [m.seq for m in second.read_during] == [3]
        assert [(item.step.kind if item.step else "message") for item in second.items] == ["said", "message", "end"]
        assert (first.number, second.number) == (1, 2)

    def test_a_message_after_the_last_run_waits_at_the_end(self) -> None:
        messages, events = two_runs()
        waiting = message(4, 30, "one more")
        entries = timeline([*messages, waiting], events)
        assert entries[-1].message == waiting

    def test_a_run_still_going_takes_the_messages_after_its_start(self) -> None:
        events = Events().add("r1", 1, "started").add("r1", 2, "model_call", text="hm", tool_calls=[]).events
        entries = timeline([message(1, 0, "go"), message(2, 5, "wait")], events)
        run = entries[-1].run
        assert run is not None
        assert run.outcome == "running"
        assert run.end is None
        assert [m.seq for m in run.read_during] == [2]

    def test_model_calls_without_text_are_not_steps(self) -> None:
        _, events = two_runs()
        run = timeline([], events)[0].run
        assert run is not None
        assert [step.kind for step in run.steps] == ["tool", "end"]

    def test_the_last_reply_is_shown_once_as_the_runs_summary(self) -> None:
        events = (
            Events()
            .add("r1", 1, "started")
            .add("r1", 2, "model_call", text="Looking.", tool_calls=["ls"])
            .add("r1", 3, "model_call", text="Done: it adds.", tool_calls=[])
            .add("r1", 4, "completed", summary="Done: it adds.")
            .events
        )
        run = timeline([], events)[0].run
        assert run is not None
        assert [(step.kind, step.event.data.get("text")) for step in run.steps] == [
            ("said", "Looking."),
            ("end", None),
        ]


class TestToolSteps:
    def test_execute_shows_its_command_output_and_exit_code(self) -> None:
        step = tool_step(
            {
                "name": "execute",
                "status": "success",
                "arguments": json.dumps({"command": "pytest -q"}),
                "output": "3 passed\n[Command succeeded with exit code 0]",
                "exit_code": 0,
            }
        )
        assert (step.command, step.output, step.exit_code) == ("pytest -q", "3 passed", 0)

    def test_a_command_cut_short_is_shown_as_far_as_it_goes(self) -> None:
        raw = json.dumps({"command": "echo " + "x" * 400})[:299] + "…"
        step = tool_step({"name": "execute", "status": "error", "arguments": raw, "output": "boom"})
        assert step.command is not None
        assert step.command.startswith("echo xxx")
        assert step.command.endswith(" …")
        assert step.exit_code is None

    def test_other_tools_show_their_arguments(self) -> None:
        step = tool_step(
            {"name": "github_comment", "status": "success", "arguments": json.dumps({"body": "Done: `add()`"})}
        )
        assert step.command is None
        assert step.arguments == {"body": "Done: `add()`"}


class TestRunUsage:
    def test_sums_of_the_events_and_an_unknown_cost_when_one_call_is_unpriced(self) -> None:
        events = (
            Events()
            .add("r", 0, "model_call", input_tokens=100, cached_input_tokens=40, output_tokens=10, cost_usd=0.01,
                 seconds=1.5)
            .add("r", 1, "model_call", input_tokens=50, output_tokens=5, cost_usd=None, seconds=0.5)
            .events
        )  # fmt: skip
        usage = RunUsage.of(events)
        assert (usage.model_calls, usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (
            2,
            150,
            40,
            15,
        )
        assert usage.cost_usd is None
        assert usage.model_seconds == 2.0
        priced = RunUsage.of(events[:1])
        assert priced.cost_usd == 0.01

    def test_the_ledger_wins_when_it_has_the_run(self) -> None:
        events = Events().add("r", 0, "model_call", input_tokens=1, output_tokens=1, cost_usd=None, seconds=2).events
        recorded = UsageTotals(calls=3, input_tokens=900, output_tokens=90, priced_cost_usd=0.25)
        usage = RunUsage.of(events, recorded)
        assert (usage.model_calls, usage.input_tokens, usage.output_tokens, usage.cost_usd) == (3, 900, 90, 0.25)
        assert usage.model_seconds == 2
