"""What a tool is built with: the thread it acts for and the service's live parts.

Tools are built per run (:func:`drydock.tools.build_tools`), so a tool closes over the thread's
scope instead of trusting the model to name the thread, repository or conversation.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from langchain_core.tools import ToolException
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.bus.envelopes import EventType, RunEvent
from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.effects import EffectLedger, Effects
from drydock.infra.redis import Keys
from drydock.redaction import Redactor
from drydock.threads.approvals import PlanGate
from drydock.threads.scope import ThreadScope


@dataclass(frozen=True)
class ToolContext:
    scope: ThreadScope
    settings: Settings
    bus: Bus
    redis: Redis
    keys: Keys
    outbound: Outbound
    http: httpx.AsyncClient
    """A shared client for the network tools (no credentials attached)."""
    redactor: Redactor | None = None
    """Redacts secrets from the events the tools record (None: nothing redacted)."""

    @property
    def effects(self) -> Effects:
        """Where the tool makes its external writes, once per tool call."""
        return Effects(EffectLedger(self.redis, self.keys), self.scope.thread_id)

    async def emit(self, type: EventType, **data: object) -> None:
        """Record what the tool did as a run event of the thread (secrets redacted)."""
        if self.redactor is not None:
            data = self.redactor.redact_value(data, where=f"event {type.value}", thread_id=self.scope.thread_id)
        await self.bus.emit(RunEvent(thread_id=self.scope.thread_id, run_id=self.scope.run_id, type=type, data=data))


async def refuse_before_approval(context: ToolContext) -> None:
    """Raise :class:`ToolException` (the model reads it) while the thread's changes wait for its
    owner's approval of a plan (:class:`~drydock.threads.approvals.PlanGate`)."""
    gate = PlanGate.create(context.redis, context.keys, context.settings)
    refusal = await gate.refusal(context.scope.thread_id, context.scope.repository) if gate is not None else None
    if refusal is not None:
        raise ToolException(refusal)
