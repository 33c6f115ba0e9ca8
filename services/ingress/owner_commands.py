"""The thread owner's commands in the source channel (:mod:`drydock.threads.approvals`):
``@drydock approve`` approves the thread's held plan and held pushes.

Only the thread's owner may approve (its Drydock user, or its source account when it has no
Drydock owner); anyone else is answered and nothing changes. An approval is recorded before
the message goes on to the coder as a follow-up, so the woken run finds its pushes allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import structlog
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.infra.server_keys import ServerKeys, ServerKeysError
from drydock.runtime import Runtime
from drydock.threads.approvals import (
    NOT_OWNER_TEXT,
    WRITTEN_BEFORE_TEXT,
    Approvals,
    Approved,
    announce,
    is_owner,
)
from drydock.threads.metadata import ThreadMetadataStore

log = structlog.get_logger(__name__)

UNAVAILABLE_TEXT = "Approvals are unavailable: this Drydock has no DRYDOCK_CRYPTO_KEYS to sign them."


@dataclass(frozen=True)
class Outcome:
    """An approval made (``approved``), or the ``answer`` that refuses it."""

    approved: Approved | None = None
    answer: str | None = None


@dataclass(frozen=True)
class OwnerCommands:
    approvals: Approvals | None
    """``None`` without server keys: approvals cannot be signed."""
    metadata: ThreadMetadataStore
    bus: Bus

    @classmethod
    def create(cls, runtime: Runtime, redis: Redis, metadata: ThreadMetadataStore) -> OwnerCommands:
        try:
            approvals: Approvals | None = Approvals(
                redis, runtime.keys, ServerKeys.from_settings(runtime.settings.crypto)
            )
        except ServerKeysError:
            approvals = None
        return cls(approvals, metadata, runtime.bus)

    async def approve(
        self, thread_id: str, *, user_id: str | None, author: str, written_at: datetime | None = None
    ) -> Outcome:
        """The owner's ``approve`` for the thread, written at ``written_at`` when its source says;
        a refusal's answer for anyone else, and for an approval written before everything
        that waits (a replayed delivery keeps its old time)."""
        if self.approvals is None:
            return Outcome(answer=UNAVAILABLE_TEXT)
        if not is_owner(await self.metadata.find(thread_id), user_id=user_id, author=author):
            log.warning("approval by a non-owner refused", thread_id=thread_id, user_id=user_id, author=author)
            return Outcome(answer=NOT_OWNER_TEXT)
        by = user_id or author
        approved = await self.approvals.approve(thread_id, by=by, written_at=written_at)
        if not approved.anything and written_at is not None:
            plan, holds = await self.approvals.pending(thread_id)
            if plan is not None or holds:
                log.warning(
                    "approval written before what waits refused",
                    thread_id=thread_id,
                    user_id=user_id,
                    author=author,
                    written_at=written_at.isoformat(),
                )
                return Outcome(answer=WRITTEN_BEFORE_TEXT)
        if approved.anything:
            await announce(self.bus, thread_id, approved, by=by, via="reply")
        return Outcome(approved=approved)
