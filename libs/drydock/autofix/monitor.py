"""The fallback monitor: every ``monitor_interval`` it scans the open agent pull requests
through the GitHub API and feeds what it finds (failing checks on the head, a merge conflict,
people's review feedback the agent has not answered: :mod:`~drydock.autofix.review_feedback`)
to the same decision function as webhooks. It exists only for events that never arrived; what
webhooks already decided is skipped cheaply (the revision was processed) and not recorded again.

A pull request autofix is off for costs no API call. A thread whose repair ended without an
event (its TTL ran out) gets its pending requests decided here.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog
from redis.exceptions import RedisError

from drydock.autofix.controller import AutofixController, Considered
from drydock.autofix.policy import Kind, Outcome, Signal, Source
from drydock.autofix.review_feedback import unanswered
from drydock.bus import BusUnavailable
from drydock.channels.errors import OutboundFailed
from drydock.errors import describe
from drydock.threads.pr_records import PullRequestRecord

log = structlog.get_logger(__name__)

SCAN_CONCURRENCY = 8


def monitor_delivery_id(record: PullRequestRecord, head_sha: str, kind: Kind) -> str:
    return f"monitor:{record.repository.lower()}#{record.number}:{head_sha}:{kind.value}"


class Monitor:
    def __init__(self, controller: AutofixController) -> None:
        self.controller = controller

    async def scan(self) -> list[Considered]:
        """Scan every open agent pull request once; returns the decisions made."""
        records = await self.controller.records.open_records()
        slots = asyncio.Semaphore(SCAN_CONCURRENCY)

        async def one(record: PullRequestRecord) -> list[Considered]:
            async with slots:
                try:
                    return await self.scan_pull(record)
                except (OutboundFailed, BusUnavailable, RedisError, OSError) as error:
                    log.warning("monitor could not scan a pull request", thread_id=record.thread_id,
                                pull_request=f"{record.repository}#{record.number}", error=describe(error))  # fmt: skip
                    return []

        found = await asyncio.gather(*(one(record) for record in records))
        return [considered for decisions in found for considered in decisions]

    async def scan_pull(self, record: PullRequestRecord) -> list[Considered]:
        """Look at one pull request the way its missed webhooks would have."""
        controller = self.controller
        if await controller.repairs.active(record.thread_id) is None:
            await controller.drain(record.thread_id)
        thread = await controller.metadata.find(record.thread_id)
        enabled = await controller.enablements.of(
            thread.owner if thread is not None else None, controller.host, record.repository, record.number
        )
        if not enabled.enabled or controller.github is None:
            return []
        pull = await controller.github.pull(record.repository, record.number)
        if not pull.open:
            await controller.closed(record, merged=pull.merged)
            return []
        decisions = []
        failing = await controller.github.failing_checks(
            record.repository, pull.head_sha, controller.autofix.failure_conclusions
        )
        if failing:
            signal = Signal(
                Kind.CI, pull.head_sha, Source.MONITOR, monitor_delivery_id(record, pull.head_sha, Kind.CI),
                checks=tuple(sorted(failing)),
            )  # fmt: skip
            decisions.append(await controller.consider(record, signal))
        if pull.mergeable is False:
            delivery = monitor_delivery_id(record, pull.head_sha, Kind.CONFLICT)
            decisions.append(
                await controller.consider(record, Signal(Kind.CONFLICT, pull.head_sha, Source.MONITOR, delivery))
            )
        decisions += await self._review_feedback(record, pull.head_sha)
        return decisions

    async def _review_feedback(self, record: PullRequestRecord, head_sha: str) -> list[Considered]:
        """Consider the newest unanswered feedback of each person, newest first, until one is
        acted on (a person without write access is skipped, and the next one is looked at)."""
        controller = self.controller
        github = controller.github
        assert github is not None
        reviews, comments = await asyncio.gather(
            github.reviews(record.repository, record.number), github.review_comments(record.repository, record.number)
        )
        feedback = unanswered(reviews, comments, head_sha=head_sha, agent_login=controller.agent_login)
        decisions: list[Considered] = []
        seen: set[str] = set()
        for item in feedback:
            if item.actor.lower() in seen:
                continue
            seen.add(item.actor.lower())
            delivery = monitor_delivery_id(record, head_sha, Kind.REVIEW)
            signal = Signal(Kind.REVIEW, head_sha, Source.MONITOR, delivery, actor=item.actor, url=item.url)
            considered = await controller.consider(record, signal)
            decisions.append(considered)
            if considered.decision.outcome is not Outcome.SKIP:
                break
        return decisions

    async def run_forever(self, *, interval: float, stop: asyncio.Event) -> None:
        """Scan every ``interval`` seconds until ``stop`` is set (checked each round, since
        redis-py can swallow a cancellation mid-command)."""
        while not stop.is_set():
            try:
                decided = await self.scan()
                if decided:
                    log.info("monitor scan decided", decisions=len(decided))
            except (RedisError, OSError) as error:
                log.warning("autofix monitor cannot reach Redis", error=describe(error))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval)
