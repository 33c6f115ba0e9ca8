"""A thread as one conversation: its messages and its runs in the order they happened, each run
with the messages that started it, its steps (what the agent said, each tool call with its
arguments and outcome, what it posted, how it ended) and its usage.

Which message started which run: a message received while no run is going on wakes the thread,
so it starts the next run; a message received during a run is read by that run at its next step
(the inbox is read between steps), so it is shown inside it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from drydock.usage.ledger import UsageTotals
from services.dashboard.threads.schemas import EventOut, MessageOut

END_TYPES = frozenset({"completed", "step_limit", "stopped", "error"})
_COMMAND = re.compile(r'"command":\s*"((?:[^"\\]|\\.)*)')
_EXIT_LINE = re.compile(r"\n?\[Command (?:succeeded|failed) with exit code -?\d+\]\s*")


@dataclass(frozen=True)
class ToolStep:
    name: str
    status: str
    """``success`` or ``error``, as the tool answered."""
    arguments: dict[str, Any] | None
    """The call's arguments, when the event kept them whole."""
    raw_arguments: str
    """The arguments as the event carries them (JSON, possibly cut short)."""
    command: str | None
    """For ``execute``: the shell command."""
    output: str
    exit_code: int | None


@dataclass(frozen=True)
class Step:
    seq: int
    at: datetime
    kind: Literal["said", "tool", "posted", "end", "other"]
    event: EventOut
    tool: ToolStep | None = None


@dataclass
class RunUsage:
    model_calls: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    """None: unknown (a call without a known price, or no call)."""
    model_seconds: float = 0.0

    @classmethod
    def of(cls, events: list[EventOut], recorded: UsageTotals | None = None) -> RunUsage:
        """The run's usage: the ledger's totals (which count subagents' calls too) when it has
        them, else the sums of its model-call events; the model time from the events."""
        calls = [event.data for event in events if event.type == "model_call"]
        seconds = sum(float(data.get("seconds") or 0) for data in calls)
        if recorded is not None and recorded.calls:
            return cls(
                model_calls=recorded.calls,
                input_tokens=recorded.input_tokens,
                cached_input_tokens=recorded.cached_input_tokens,
                output_tokens=recorded.output_tokens,
                reasoning_tokens=recorded.reasoning_tokens,
                cost_usd=recorded.cost_usd,
                model_seconds=seconds,
            )
        costs = [data.get("cost_usd") for data in calls]
        known = bool(costs) and all(isinstance(cost, int | float) for cost in costs)
        return cls(
            model_calls=len(calls),
            input_tokens=sum(int(data.get("input_tokens") or 0) for data in calls),
            cached_input_tokens=sum(int(data.get("cached_input_tokens") or 0) for data in calls),
            output_tokens=sum(int(data.get("output_tokens") or 0) for data in calls),
            reasoning_tokens=sum(int(data.get("reasoning_tokens") or 0) for data in calls),
            cost_usd=sum(float(cost) for cost in costs if isinstance(cost, int | float)) if known else None,
            model_seconds=seconds,
        )


@dataclass(frozen=True)
class Entry:
    """One item of the timeline (a message between runs, or a run) or of a run (a step, or a
    message that arrived during it)."""

    message: MessageOut | None = None
    run: Run | None = None
    step: Step | None = None


@dataclass
class Run:
    run_id: str
    number: int
    """1 for the thread's first run."""
    events: list[EventOut]
    started_by: list[MessageOut] = field(default_factory=list)
    """The messages that woke the thread for this run."""
    read_during: list[MessageOut] = field(default_factory=list)
    """Messages that arrived while it ran."""
    usage: RunUsage = field(default_factory=RunUsage)

    @property
    def started_at(self) -> datetime:
        return self.events[0].at

    @property
    def start(self) -> EventOut | None:
        return next((event for event in self.events if event.type == "started"), None)

    @property
    def end(self) -> EventOut | None:
        return next((event for event in reversed(self.events) if event.type in END_TYPES), None)

    @property
    def outcome(self) -> str:
        """``running``, or the end event's type."""
        end = self.end
        return end.type if end is not None else "running"

    @property
    def seconds(self) -> float | None:
        end = self.end
        return (end.at - self.started_at).total_seconds() if end is not None else None

    @property
    def steps(self) -> list[Step]:
        """What the run did; its last reply is shown once, as the summary its end carries."""
        steps = [step_of(event) for event in self.events if event.type != "started" and shown(event)]
        end = self.end
        summary = str(end.data.get("summary") or "") if end is not None and end.type == "completed" else ""
        said = [step for step in steps if step.kind == "said"]
        if summary and said and summary.startswith(str(said[-1].event.data.get("text") or "").strip()):
            steps.remove(said[-1])
        return steps

    @property
    def items(self) -> list[Entry]:
        """Its steps with the messages that arrived while it ran, in time order."""
        steps = [(step.at, Entry(step=step)) for step in self.steps]
        messages = [(message.received_at, Entry(message=message)) for message in self.read_during]
        return [entry for _, entry in sorted(steps + messages, key=lambda pair: pair[0])]


def shown(event: EventOut) -> bool:
    """A model call is shown only when the agent said something: its tool calls are shown as
    the tool steps that answer them."""
    return event.type != "model_call" or bool(str(event.data.get("text") or "").strip())


def _arguments(raw: Any) -> tuple[dict[str, Any] | None, str]:
    if isinstance(raw, dict):
        return raw, json.dumps(raw, ensure_ascii=False)
    text = str(raw or "")
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = None
    return (parsed if isinstance(parsed, dict) else None), text


def tool_step(data: dict[str, Any]) -> ToolStep:
    arguments, raw = _arguments(data.get("arguments"))
    command = None
    if data.get("name") == "execute":
        if arguments is not None and isinstance(arguments.get("command"), str):
            command = arguments["command"]
        else:
            found = _COMMAND.search(raw)
            if found:
                # Cut short mid-escape at worst: keep what decodes.
                command = json.loads(f'"{found.group(1).rstrip(chr(92))}"') + " …"
    exit_code = data.get("exit_code")
    output = str(data.get("output") or "")
    return ToolStep(
        name=str(data.get("name") or "tool"),
        status=str(data.get("status") or ""),
        arguments=arguments,
        raw_arguments=raw,
        command=command,
        output=_EXIT_LINE.sub("\n", output).strip("\n") if command is not None else output,
        exit_code=exit_code if isinstance(exit_code, int) else None,
    )


def step_of(event: EventOut) -> Step:
    kind: Literal["said", "tool", "posted", "end", "other"]
    if event.type == "model_call":
        kind = "said"
    elif event.type == "tool_call":
        return Step(event.seq, event.at, "tool", event, tool_step(event.data))
    elif event.type == "message_posted":
        kind = "posted"
    elif event.type in END_TYPES:
        kind = "end"
    else:
        kind = "other"
    return Step(event.seq, event.at, kind, event)


def runs_of(events: list[EventOut]) -> list[Run]:
    """The events grouped by run, runs in the order they began, events in stream order."""
    runs: dict[str, Run] = {}
    for event in sorted(events, key=lambda event: event.seq):
        run = runs.get(event.run_id)
        if run is None:
            run = runs[event.run_id] = Run(run_id=event.run_id, number=len(runs) + 1, events=[])
        run.events.append(event)
    return list(runs.values())


def timeline(
    messages: list[MessageOut], events: list[EventOut], usage: dict[str, UsageTotals] | None = None
) -> list[Entry]:
    """The thread's conversation, oldest first (see the module's docstring for the rule)."""
    runs = runs_of(events)
    for run in runs:
        run.usage = RunUsage.of(run.events, (usage or {}).get(run.run_id))
    entries: list[Entry] = []
    waiting = sorted(messages, key=lambda message: (message.received_at, message.seq))
    for run in runs:
        before = [message for message in waiting if message.received_at <= run.started_at]
        waiting = waiting[len(before) :]
        run.started_by = before
        entries += [Entry(message=message) for message in before]
        end = run.end
        if end is not None:
            during = [message for message in waiting if message.received_at <= end.at]
            waiting = waiting[len(during) :]
            run.read_during = during
        else:
            run.read_during, waiting = waiting, []
        entries.append(Entry(run=run))
    entries += [Entry(message=message) for message in waiting]
    return entries
