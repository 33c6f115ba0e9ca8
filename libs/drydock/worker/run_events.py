"""A run's events: what a run did, published on ``drydock.event.{thread}.{type}`` as it happens
(the dashboard's history and the thread's state, :mod:`drydock.threads.states`, come from them)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from nats.js.api import PubAck

from drydock.bus import Bus, EventType, RunEvent
from drydock.middleware import stop_reason
from drydock.redaction import Redactor
from drydock.threads.scope import ThreadScope
from drydock.threads.states import EVENT_OUTCOMES, ThreadStates
from drydock.usage.recorder import METADATA_KEY as USAGE_METADATA_KEY
from drydock.worker import metrics

PENDING_EVENTS = 64
"""Step events published at most before their acknowledgements are awaited."""


class RunEvents:
    """Publishes a run's events on ``drydock.event.{thread}.{type}``.

    The run's start and the events of each step (model and tool calls) are published without
    waiting for their acknowledgements, which are awaited before the next acknowledged event (a
    run's end) or once :data:`PENDING_EVENTS` are outstanding: neither the run's first model call
    nor a step waits for a round trip per event, and a run does not end before its events are
    stored.
    """

    def __init__(
        self, bus: Bus, scope: ThreadScope, states: ThreadStates | None = None, *, redactor: Redactor | None = None
    ) -> None:
        self._bus = bus
        self._scope = scope
        self._states = states
        self._pending: list[asyncio.Future[PubAck]] = []
        self.redactor = redactor
        """Redacts secrets from every event's data (the dashboard shows it)."""
        self._arguments: dict[str, str] = {}
        self._started = self._since = time.monotonic()
        self._ended = False

    def _event(self, type: EventType, data: dict[str, Any]) -> RunEvent:
        if self.redactor is not None:
            data = self.redactor.redact_value(data, where=f"event {type.value}", thread_id=self._scope.thread_id)
        return RunEvent(thread_id=self._scope.thread_id, run_id=self._scope.run_id, type=type, data=data)

    async def emit(self, type: EventType, **data: Any) -> None:
        await self.acknowledged()
        event = self._event(type, data)
        await self._bus.emit(event)
        if self._states is not None:
            await self._states.observe(event)
        outcome = EVENT_OUTCOMES.get(type)
        if outcome is not None and not self._ended:
            self._ended = True
            role = self._scope.role.value
            metrics.RUNS.labels(role, outcome).inc()
            metrics.RUN_SECONDS.labels(role, outcome).observe(time.monotonic() - self._started)

    async def begin(self, **data: Any) -> None:
        """The run's ``started`` event: the thread's state is set before this returns (a run that
        dies from here on is resumed mid-turn), the event's acknowledgement is awaited with the
        steps' events, before the run's end."""
        await self.acknowledged()
        event = self._event(EventType.STARTED, data)
        self._pending.append(await self._bus.emit_soon(event))
        if self._states is not None:
            await self._states.observe(event)

    async def emit_soon(self, type: EventType, **data: Any) -> None:
        """Publish an event that changes no thread state; its acknowledgement is awaited later."""
        self._pending.append(await self._bus.emit_soon(self._event(type, data)))
        if len(self._pending) >= PENDING_EVENTS:
            await self.acknowledged()

    async def acknowledged(self) -> None:
        """Wait until every event published so far is stored."""
        pending, self._pending = self._pending, []
        await self._bus.acknowledged(pending)

    @property
    def ended(self) -> bool:
        """Whether an event that ends the run was published."""
        return self._ended

    def abandon(self) -> None:
        """Stop waiting for the acknowledgements still outstanding (after a run that failed)."""
        for future in self._pending:
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # retrieved, so that asyncio does not log it as lost
        self._pending.clear()

    async def from_update(self, update: Any) -> None:
        """Events for one graph step's update: a model call, or the tool calls it answered."""
        if not isinstance(update, dict):
            return
        # The time since the previous step: for a model step, how long the model call took.
        now, since = time.monotonic(), self._since
        self._since = now
        for node, change in update.items():
            for message in _messages(change):
                # A stop message stands in for a model call that was not made.
                if node == "model" and isinstance(message, AIMessage) and stop_reason([message]) is None:
                    arguments = [_brief(call["args"]) for call in message.tool_calls]
                    for call, brief in zip(message.tool_calls, arguments, strict=True):
                        if call.get("id"):
                            self._arguments[str(call["id"])] = brief
                    await self.emit_soon(
                        EventType.MODEL_CALL,
                        tool_calls=[call["name"] for call in message.tool_calls],
                        arguments=arguments,
                        text=message.text[:500],
                        **_usage(message),
                        seconds=round(now - since, 3),
                    )
                elif node == "tools" and isinstance(message, ToolMessage):
                    await self.emit_soon(
                        EventType.TOOL_CALL,
                        name=message.name,
                        status=message.status,
                        output=message.text[:500],
                        arguments=self._arguments.pop(message.tool_call_id, None),
                        **_exit_code(message),
                    )


_EXIT_CODE = re.compile(r"\[Command (?:succeeded|failed) with exit code (-?\d+)\]")


def _usage(message: AIMessage) -> dict[str, Any]:
    """A model call's tokens and cost for its event: as recorded at the call
    (:mod:`drydock.usage.recorder`), else the tokens the reply reports, cost unknown."""
    recorded = message.response_metadata.get(USAGE_METADATA_KEY)
    if isinstance(recorded, dict):
        return {key: value for key, value in recorded.items() if key != "model"}
    usage: Mapping[str, Any] = message.usage_metadata or {}
    return {"input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens"), "cost_usd": None}


def _exit_code(message: ToolMessage) -> dict[str, int]:
    """The exit code of deepagents' ``execute``: from the message's artifact, else from the
    status line of its output (which the event's shortened output may have lost)."""
    artifact = message.artifact
    if isinstance(artifact, dict) and isinstance(artifact.get("exit_code"), int):
        return {"exit_code": artifact["exit_code"]}
    found = _EXIT_CODE.findall(message.text)
    return {"exit_code": int(found[-1])} if found else {}


def _messages(change: Any) -> list[BaseMessage]:
    changes = change if isinstance(change, list) else [change]
    found: list[BaseMessage] = []
    for item in changes:
        messages = item.get("messages") if isinstance(item, dict) else None
        if isinstance(messages, list):
            found += [m for m in messages if isinstance(m, BaseMessage)]
    return found


def _brief(arguments: Mapping[str, Any]) -> str:
    """A tool call's arguments for an event: JSON, cut short."""
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return text if len(text) <= 300 else text[:299] + "…"
