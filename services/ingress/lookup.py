"""Everything routing reads from Redis, fetched in one pipelined round trip together with the
delivery's de-duplication claim: team defaults, linked accounts, repository settings, the
durable PR records and branch indexes, and whether candidate threads exist."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from drydock.accounts import AccountsStore, Provider, RepositorySettings, TeamDefaults
from drydock.infra.redis import Batch, BatchConnections, Keys, Queue
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
    """Collects reads, then runs them with the claim in a single batch (:meth:`execute`)."""

    def __init__(
        self,
        batches: BatchConnections,
        keys: Keys,
        deliveries: Deliveries,
        accounts: AccountsStore,
        records: PullRequestStore,
        metadata: ThreadMetadataStore,
    ) -> None:
        self._batches = batches
        self._keys = keys
        self._deliveries = deliveries
        self._accounts = accounts
        self._records = records
        self._metadata = metadata
        self._host = accounts.host
        self._steps: list[tuple[Callable[[Queue], object], Callable[[Lookup, Any], None]]] = []
        self._seen: set[tuple[str, ...]] = set()

    def _add(
        self, identity: tuple[str, ...], queue: Callable[[Queue], object], store: Callable[[Lookup, Any], None]
    ) -> None:
        if identity not in self._seen:
            self._seen.add(identity)
            self._steps.append((queue, store))

    def user(self, provider: Provider, external_id: str) -> None:
        def store(lookup: Lookup, reply: Any) -> None:
            lookup.users[(provider, external_id)] = reply

        self._add(
            ("user", provider, external_id), lambda p: self._accounts.queue_user_for(p, provider, external_id), store
        )

    def repository(self, full_name: str) -> None:
        def store(lookup: Lookup, reply: Any) -> None:
            lookup.repositories[full_name.lower()] = _repository(reply)

        self._add(("repo", full_name.lower()), lambda p: self._accounts.queue_repository(p, full_name), store)

    def pull_request(self, full_name: str, number: int) -> None:
        def store(lookup: Lookup, reply: Any) -> None:
            lookup.pr_threads[(full_name.lower(), number)] = reply

        self._add(
            ("pr", full_name.lower(), str(number)),
            lambda p: self._records.queue_thread_for(p, self._host, full_name, number),
            store,
        )

    def branch(self, full_name: str, branch: str, short: str | None) -> None:
        def store(lookup: Lookup, reply: Any) -> None:
            lookup.branch_threads[(full_name.lower(), branch)] = reply

        self._add(
            ("branch", full_name.lower(), branch),
            lambda p: self._records.queue_thread_for_branch(p, self._host, full_name, branch),
            store,
        )
        if short is not None:

            def store_short(lookup: Lookup, reply: Any) -> None:
                lookup.short_threads[short] = reply

            self._add(("short", short), lambda p: self._records.queue_thread_for_short_id(p, short), store_short)

    def finding_comment(self, full_name: str, comment_id: str) -> None:
        def store(lookup: Lookup, reply: Any) -> None:
            lookup.finding_threads[(full_name.lower(), comment_id)] = reply

        self._add(
            ("finding", full_name.lower(), comment_id),
            lambda p: p.get(self._keys.finding_comment(self._host, full_name, comment_id)),
            store,
        )

    def thread(self, thread_id: str) -> None:
        def store(lookup: Lookup, reply: Any) -> None:
            lookup.threads[thread_id] = KnownThread.from_reply(reply)

        self._add(("thread", thread_id), lambda p: self._metadata.queue_known(p, thread_id), store)

    async def execute(self, channel: str, delivery_id: str) -> Lookup:
        """Claim the delivery and run every read; one round trip."""
        batch = Batch(self._batches)
        deliveries = self._deliveries
        marks = deliveries.queue_marks(batch)
        deliveries.queue_claim(batch, channel, delivery_id)
        self._accounts.queue_team(batch)
        batch.get(self._keys.store_epoch())
        for queue, _ in self._steps:
            queue(batch)
        try:
            replies = await batch.execute()
        except BaseException:
            if marks:
                deliveries.marks_lost(marks)
            raise
        if marks:
            deliveries.marks_written(marks)
            del replies[: len(marks)]
        lookup = Lookup(
            claim=deliveries.claim_result(replies[0], channel, delivery_id),
            team=_team(replies[1]),
            store_epoch=replies[2],
        )
        for (_, store), reply in zip(self._steps, replies[3:], strict=True):
            store(lookup, reply)
        return lookup
