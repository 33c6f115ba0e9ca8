"""Everything routing reads from Redis, fetched in one pipelined round trip together with the
delivery's de-duplication claims: team defaults, linked accounts, repository settings, the
durable PR records and branch indexes, and whether candidate threads exist."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from drydock.accounts import AccountsStore, Provider, RepositorySettings, TeamDefaults
from drydock.infra.redis import Batch, BatchConnections, Keys
from drydock.threads.metadata import KnownThread, ThreadMetadataStore
from drydock.threads.pr_records import PullRequestStore
from services.ingress.dedup import ClaimResult, Deliveries

# Parsed once per distinct stored JSON: the records are frozen, and a changed setting is a new
# string, so this saves a validation per delivery without ever answering from a stale value.
_team = functools.lru_cache(maxsize=16)(TeamDefaults.from_json)
_repository = functools.lru_cache(maxsize=1024)(RepositorySettings.from_json)


@dataclass
class Lookup:
    """What routing knows about a delivery's world; absent entries were not asked for."""

    claim: ClaimResult = ClaimResult.CLAIMED
    store_epoch: str | None = None
    """The store's epoch marker, to tell a wiped store from one without the records asked for."""
    team: TeamDefaults = field(default_factory=TeamDefaults)
    users: dict[tuple[Provider, str], str | None] = field(default_factory=dict)
    repositories: dict[str, RepositorySettings | None] = field(default_factory=dict)
    pr_threads: dict[tuple[str, int], str | None] = field(default_factory=dict)
    branch_threads: dict[tuple[str, str], str | None] = field(default_factory=dict)
    short_threads: dict[str, str | None] = field(default_factory=dict)
    threads: dict[str, KnownThread | None] = field(default_factory=dict)
    finding_threads: dict[tuple[str, str], str | None] = field(default_factory=dict)
    """The reviewer thread whose finding a review comment carries, by repository and comment id."""

    def repository(self, full_name: str) -> RepositorySettings | None:
        return self.repositories.get(full_name.lower())


class LookupBatch:
    """Collects reads, then runs them with the claim in a single batch (:meth:`execute`).

    Each read is queued on the batch when asked for (once per distinct read) and noted as the
    :class:`Lookup` field and key its reply goes to, with how to decode it."""

    def __init__(
        self,
        batches: BatchConnections,
        keys: Keys,
        deliveries: Deliveries,
        accounts: AccountsStore,
        records: PullRequestStore,
        metadata: ThreadMetadataStore,
    ) -> None:
        self._batch = Batch(batches)
        self._keys = keys
        self._deliveries = deliveries
        self._accounts = accounts
        self._records = records
        self._metadata = metadata
        self._host = accounts.host
        self._reads: list[tuple[str, Hashable, Callable[[Any], Any] | None]] = []
        self._seen: set[tuple[str, Hashable]] = set()

    def _new(self, field_name: str, key: Hashable, decode: Callable[[Any], Any] | None = None) -> bool:
        """Note a read whose reply goes to ``Lookup.{field_name}[key]``; ``False`` if already asked."""
        if (field_name, key) in self._seen:
            return False
        self._seen.add((field_name, key))
        self._reads.append((field_name, key, decode))
        return True

    def user(self, provider: Provider, external_id: str) -> None:
        if self._new("users", (provider, external_id)):
            self._accounts.queue_user_for(self._batch, provider, external_id)

    def repository(self, full_name: str) -> None:
        if self._new("repositories", full_name.lower(), _repository):
            self._accounts.queue_repository(self._batch, full_name)

    def pull_request(self, full_name: str, number: int) -> None:
        if self._new("pr_threads", (full_name.lower(), number)):
            self._records.queue_thread_for(self._batch, self._host, full_name, number)

    def branch(self, full_name: str, branch: str, short: str | None) -> None:
        if self._new("branch_threads", (full_name.lower(), branch)):
            self._records.queue_thread_for_branch(self._batch, self._host, full_name, branch)
        if short is not None and self._new("short_threads", short):
            self._records.queue_thread_for_short_id(self._batch, short)

    def finding_comment(self, full_name: str, comment_id: str) -> None:
        if self._new("finding_threads", (full_name.lower(), comment_id)):
            self._batch.get(self._keys.finding_comment(self._host, full_name, comment_id))

    def thread(self, thread_id: str) -> None:
        if self._new("threads", thread_id, KnownThread.from_reply):
            self._metadata.queue_known(self._batch, thread_id)

    async def execute(self, channel: str, delivery_id: str, identity: str | None = None) -> Lookup:
        """Claim the delivery (and its object, see :mod:`services.ingress.dedup`) and run every
        read; one round trip."""
        batch = self._batch
        deliveries = self._deliveries
        # The waiting done marks go ahead of the claims: a redelivery or a replay finds its own.
        marks = deliveries.queue_marks(batch)
        self._accounts.queue_team(batch)
        batch.get(self._keys.store_epoch())
        deliveries.queue_claim(batch, channel, delivery_id, identity)
        try:
            replies = await batch.execute()
        except BaseException:
            if marks:
                deliveries.marks_lost(marks)
            raise
        if marks:
            deliveries.marks_written(marks)
        own = len(self._reads) + len(marks)
        team, store_epoch = replies[own : own + 2]
        lookup = Lookup(
            claim=deliveries.claim_result(replies[own + 2 :], channel, delivery_id, identity),
            team=_team(team),
            store_epoch=store_epoch,
        )
        for (field_name, key, decode), reply in zip(self._reads, replies, strict=False):
            getattr(lookup, field_name)[key] = reply if decode is None else decode(reply)
        return lookup
