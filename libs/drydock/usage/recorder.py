"""Recording one model call's usage at the model-call boundary (the step-limit middleware calls
it with each reply): the run's Redis roll-ups, the Prometheus counters, and the usage written
into the reply's ``response_metadata`` (``drydock_usage``), from which the run's ``model_call``
event takes it."""

from __future__ import annotations

import asyncio

import structlog
from langchain_core.messages import AIMessage

from drydock.errors import describe
from drydock.model_catalog import PriceTable
from drydock.usage import metrics
from drydock.usage.calls import CallUsage
from drydock.usage.ledger import UsageLedger, UsageScope

log = structlog.get_logger(__name__)

METADATA_KEY = "drydock_usage"
"""Where a reply's ``response_metadata`` carries its :meth:`CallUsage.as_event`."""


class UsageRecorder:
    """Records the usage of one run's model calls (its agent's and its subagents').

    The Redis roll-ups are written beside the run, not in its way: awaited at the model call,
    their round trip was a fifth of an agent step's overhead. :meth:`flush` waits for those
    still being written; the run calls it before it ends."""

    def __init__(self, ledger: UsageLedger, prices: PriceTable, scope: UsageScope) -> None:
        self.ledger = ledger
        self.prices = prices
        self.scope = scope
        self._counted = False
        self._writing: set[asyncio.Task[None]] = set()

    async def record(self, message: AIMessage, model: str) -> CallUsage | None:
        """Count the usage ``message`` reports for a call to ``model``; None when it reports none.
        A roll-up that cannot be written is logged, not raised: the call is made and paid for."""
        call = CallUsage.of(message, model, self.prices)
        if call is None:
            return None
        message.response_metadata[METADATA_KEY] = call.as_event()
        scope = self.scope
        labels = {"role": scope.role, "model": call.model, "repository": scope.repository or ""}
        metrics.MODEL_CALLS.labels(**labels, priced=str(call.cost_usd is not None).lower()).inc()
        for kind, amount in (
            ("input", call.input_tokens),
            ("cached_input", call.cached_input_tokens),
            ("output", call.output_tokens),
            ("reasoning", call.reasoning_tokens),
        ):
            metrics.MODEL_TOKENS.labels(**labels, kind=kind).inc(amount)
        if call.cost_usd is not None:
            metrics.MODEL_COST.labels(**labels).inc(call.cost_usd)
        # Decided here, not in the write: two writes in flight must not both count the run.
        first, self._counted = not self._counted, True
        task = asyncio.create_task(self._add(call, first=first))
        self._writing.add(task)
        task.add_done_callback(self._writing.discard)
        return call

    async def _add(self, call: CallUsage, *, first: bool) -> None:
        scope = self.scope
        try:
            await self.ledger.add(scope, call, first=first)
        except Exception as error:
            log.warning(
                "usage roll-up not written", thread_id=scope.thread_id, run_id=scope.run_id, error=describe(error)
            )

    async def flush(self) -> None:
        """Wait until every roll-up recorded so far is written (or its failure logged)."""
        while pending := [task for task in self._writing if not task.done()]:
            await asyncio.gather(*pending)
