"""Recording a refusal: a log line with the thread id, a metric, and for policy denials a
``proxy_denied`` event on the thread (``drydock.event.{thread_id}.proxy_denied``)."""

from __future__ import annotations

import structlog

from drydock.bus import BusUnavailable, EventType, RunEvent
from drydock.credentials import Grant
from drydock.errors import describe
from services.credential_proxy.context import ProxyContext
from services.credential_proxy.metrics import REQUESTS
from services.credential_proxy.policy import Denial

log = structlog.get_logger(__name__)


async def record_denial(
    ctx: ProxyContext, grant: Grant, denial: Denial, *, route: str, method: str, target: str
) -> None:
    """Log, count and publish a policy denial. A bus outage is logged, never turned into an allow."""
    REQUESTS.labels(route, "denied").inc()
    fields = {
        "sandbox_id": grant.sandbox_id,
        "role": grant.role.value,
        "repository": grant.repository,
        "route": route,
        "method": method,
        "target": target,
        "reason": denial.reason,
        "message": denial.message,
    }
    log.warning("proxy denied", thread_id=grant.thread_id, **fields)
    try:
        # The proxy does not know which run is using the sandbox; the event names the sandbox instead.
        await ctx.runtime.bus.emit(
            RunEvent(thread_id=grant.thread_id, run_id="", type=EventType.PROXY_DENIED, data=fields)
        )
    except BusUnavailable as error:
        log.error("proxy denial event not published", thread_id=grant.thread_id, error=describe(error))
