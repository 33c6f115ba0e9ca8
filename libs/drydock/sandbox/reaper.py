"""Deleting sandboxes nobody needs: idle ones and orphans.

* **idle**: the thread's metadata names the sandbox, but it was last used more than
  ``idle_ttl`` ago. The metadata is cleared first (compare-and-set), so no worker reconnects to a
  sandbox being deleted; the thread's next run creates a new one and restores its snapshot.
* **orphaned**: no thread metadata names the sandbox (the thread is gone, or a creator died
  between creating it and recording its id), and it is older than ``orphan_grace``, which
  protects a creation still in flight. That includes sandboxes whose records are gone (a store
  restarted empty): the providers list them too, local daemons by their directory in the root
  or the ``DRYDOCK_SANDBOX_ID`` in their environment, pods by their sandbox labels.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import structlog

from drydock.config import SandboxSettings
from drydock.sandbox.provider import SandboxProvider
from drydock.sandbox.records import SandboxStore
from drydock.threads.fields import SANDBOX_ID
from drydock.threads.metadata import ThreadMetadataStore, ThreadNotFound

log = structlog.get_logger(__name__)


@dataclass
class ReapReport:
    idle: list[str] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)

    @property
    def deleted(self) -> set[str]:
        return set(self.idle) | set(self.orphaned)


async def reap(
    *,
    provider: SandboxProvider,
    records: SandboxStore,
    metadata: ThreadMetadataStore,
    settings: SandboxSettings,
    now: float | None = None,
) -> ReapReport:
    """Delete the provider's idle and orphaned sandboxes; what was deleted, by reason."""
    now = time.time() if now is None else now
    report = ReapReport()
    for handle in await provider.list():
        thread = await metadata.find(handle.thread_id)
        named = thread is not None and thread.sandbox_id == handle.id
        if not named:
            old_enough = now - handle.created_at.timestamp() > settings.orphan_grace.total_seconds()
            if old_enough and await provider.delete(handle.id):
                report.orphaned.append(handle.id)
                log.info("reaped an orphaned sandbox", sandbox_id=handle.id, thread_id=handle.thread_id)
            continue
        last_used = await records.last_used(handle.id)
        if last_used is None or now - last_used <= settings.idle_ttl.total_seconds():
            continue
        try:
            released = await metadata.compare_and_set(handle.thread_id, SANDBOX_ID, expected=handle.id, new=None)
        except ThreadNotFound:
            released = True
        if released and await provider.delete(handle.id):
            report.idle.append(handle.id)
            log.info("reaped an idle sandbox", sandbox_id=handle.id, thread_id=handle.thread_id)
    return report
