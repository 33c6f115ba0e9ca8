"""What the analyzer learns a repository's review guidelines from, and its progress.

Two modes (DESIGN.md section 6):

- **bootstrap**: the review comments people wrote on the repository's recent merged pull
  requests. With fewer than ``review.bootstrap_min_comments`` of them there is nothing to
  learn from yet and no guidelines are written.
- **continual**: the outcomes of the reviewer's own findings since the last refinement:
  resolved or dismissed (and why), the replies in their review threads, reactions.

The worker gathers the evidence before the model runs (:func:`gather_bootstrap`,
:func:`gather_continual`) and keeps it under the analyzer's thread, so ``save_guidelines`` can
check that every rule cites evidence. Bootstrap finishes when its guidelines are saved; only
then is the repository's continual refinement scheduled (:func:`finish_bootstrap`), once.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.bus.envelopes import Author, Channel, InboxMessage, ReplyAddress
from drydock.github import GithubClient
from drydock.infra.redis import Keys
from drydock.review.findings import Finding, FindingStatus, FindingStore
from drydock.review.guidelines import GuidelineSource, GuidelinesVersion
from drydock.review.target import ReviewTargets
from drydock.roles import Role
from drydock.scheduler import Schedules
from drydock.threads import ids
from drydock.threads.fields import new_thread_fields
from drydock.threads.handoff import hand_off
from drydock.threads.metadata import ThreadMetadataStore

Mode = Literal["bootstrap", "continual"]
EXCERPT = 1500


class BootstrapState(StrEnum):
    REQUESTED = "requested"
    INSUFFICIENT = "insufficient"
    """Too little review history; bootstrap runs again when someone asks for it."""
    DONE = "done"


class EvidenceItem(BaseModel):
    """One thing a rule can cite: a person's review comment, or a finding's outcome."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    """``C<comment id>`` or ``P<pull request>.<finding id>``."""
    kind: Literal["review_comment", "finding"]
    pull_request: int
    comment_id: int | None = None
    finding_id: str | None = None
    author: str | None = None
    path: str | None = None
    line: int | None = None
    url: str | None = None
    body: str = ""
    in_reply_to: int | None = None
    severity: str | None = None
    category: str | None = None
    status: str | None = None
    note: str | None = None
    closed_by: str | None = None
    replies: list[dict[str, str]] = Field(default_factory=list)
    reactions: dict[str, int] = Field(default_factory=dict)

    def source(self) -> GuidelineSource:
        return GuidelineSource(
            kind=self.kind,
            pull_request=self.pull_request,
            comment_id=self.comment_id,
            finding_id=self.finding_id,
            url=self.url,
            author=self.author,
            excerpt=(self.body or self.note or "")[:500] or None,
        )


def source_id(source: GuidelineSource) -> str:
    """The evidence id a rule's source had (carried over by the next version)."""
    if source.kind == "finding":
        return f"P{source.pull_request}.{source.finding_id}"
    return f"C{source.comment_id}"


class Evidence(BaseModel):
    """Everything one analyzer run learns from."""

    repository: str
    mode: Mode
    items: list[EvidenceItem]
    pull_requests: int = 0
    current: GuidelinesVersion | None = None
    """The newest guidelines when the run started (continual runs refine them)."""
    until: float = Field(default_factory=time.time)
    """The outcomes up to this moment (epoch seconds) are covered."""

    def counts(self) -> dict[str, int]:
        return {
            "pull_requests": self.pull_requests,
            "review_comments": sum(item.kind == "review_comment" for item in self.items),
            "findings": sum(item.kind == "finding" for item in self.items),
        }

    def sources(self) -> dict[str, GuidelineSource]:
        """What a rule may cite: this run's evidence and the sources of the current rules."""
        found = {
            source_id(source): source
            for rule in (self.current.rules if self.current else ())
            for source in rule.sources
        }
        return found | {item.id: item.source() for item in self.items}


class AnalysisProgress:
    """The analyzer's progress on the repositories of one code host."""

    def __init__(self, redis: Redis, keys: Keys, *, host: str) -> None:
        self._redis = redis
        self._keys = keys
        self.host = host

    async def get(self, repository: str) -> dict[str, str]:
        return cast(dict[str, str], await self._redis.hgetall(self._keys.analysis(self.host, repository)))

    async def bootstrap_state(self, repository: str) -> BootstrapState | None:
        raw = cast(str | None, await self._redis.hget(self._keys.analysis(self.host, repository), "bootstrap"))
        return BootstrapState(raw) if raw else None

    async def claim_bootstrap(self, repository: str) -> bool:
        """True for the first caller to ask for the repository's bootstrap. After too little
        history, bootstrap runs again only when asked for (:func:`request_analysis`)."""
        key = self._keys.analysis(self.host, repository)
        return bool(await self._redis.hsetnx(key, "bootstrap", BootstrapState.REQUESTED.value))

    async def set(self, repository: str, **fields: str) -> None:
        mapping: dict[Any, str] = dict(fields)
        await self._redis.hset(self._keys.analysis(self.host, repository), mapping=mapping)

    async def refined_until(self, repository: str) -> float:
        raw = cast(str | None, await self._redis.hget(self._keys.analysis(self.host, repository), "refined_until"))
        return float(raw) if raw else 0.0


class EvidenceStore:
    """The evidence of an analyzer thread's current run."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def save(self, thread_id: str, evidence: Evidence) -> None:
        await self._redis.set(self._keys.analysis_evidence(thread_id), evidence.model_dump_json())

    async def get(self, thread_id: str) -> Evidence | None:
        raw = cast(str | None, await self._redis.get(self._keys.analysis_evidence(thread_id)))
        return None if raw is None else Evidence.model_validate_json(raw)


def _human(user: Any) -> bool:
    if not isinstance(user, dict):
        return False
    login = str(user.get("login") or "")
    return user.get("type") != "Bot" and not login.lower().endswith("[bot]")


def _excerpt(text: str) -> str:
    return text if len(text) <= EXCERPT else text[:EXCERPT] + " …"


async def gather_bootstrap(
    client: GithubClient, authorization: str, repository: str, *, pull_requests: int
) -> Evidence:
    """People's review comments on the most recently merged of the repository's last closed
    pull requests (at most ``pull_requests`` of them)."""
    closed = await client.list_pulls(authorization, repository, state="closed", per_page=100)
    merged = sorted((pull for pull in closed if pull.get("merged_at")), key=lambda p: str(p["merged_at"]), reverse=True)
    items: list[EvidenceItem] = []
    for pull in merged[:pull_requests]:
        number = int(pull["number"])
        for comment in await client.list_review_comments(authorization, repository, number, limit=300):
            if not _human(comment.get("user")) or not str(comment.get("body") or "").strip():
                continue
            reply_to = comment.get("in_reply_to_id")
            items.append(
                EvidenceItem(
                    id=f"C{comment['id']}",
                    kind="review_comment",
                    pull_request=number,
                    comment_id=int(comment["id"]),
                    author=str(comment["user"].get("login") or ""),
                    path=comment.get("path"),
                    line=comment.get("line") or comment.get("original_line"),
                    url=comment.get("html_url"),
                    body=_excerpt(str(comment.get("body") or "")),
                    in_reply_to=int(reply_to) if reply_to else None,
                )
            )
    return Evidence(repository=repository, mode="bootstrap", items=items, pull_requests=len(merged[:pull_requests]))


async def gather_continual(
    client: GithubClient,
    authorization: str,
    redis: Redis,
    keys: Keys,
    *,
    host: str,
    repository: str,
    since: float,
    current: GuidelinesVersion | None,
) -> Evidence:
    """The outcomes of the reviewer's findings on ``repository`` changed after ``since``."""
    until = time.time()
    threads = cast(
        list[str], await redis.zrangebyscore(keys.repository_reviews(host, repository), f"({since!r}", repr(until))
    )
    targets = ReviewTargets(redis, keys)
    items: list[EvidenceItem] = []
    pulls = 0
    for thread_id in threads:
        target = await targets.get(thread_id)
        if target is None:
            continue
        cutoff = datetime.fromtimestamp(since, UTC)
        store = FindingStore(redis, keys, thread_id, host=host, repository=repository)
        changed = [f for f in await store.all() if f.updated_at > cutoff and _has_outcome(f)]
        if not changed:
            continue
        pulls += 1
        comments = []
        if any(f.published for f in changed):
            comments = await client.list_review_comments(authorization, repository, target.number)
        for finding in changed:
            items.append(await _outcome(client, authorization, repository, target.number, finding, comments))
    return Evidence(
        repository=repository, mode="continual", items=items, pull_requests=pulls, current=current, until=until
    )


def _has_outcome(finding: Finding) -> bool:
    return finding.status is not FindingStatus.OPEN or finding.published


async def _outcome(
    client: GithubClient,
    authorization: str,
    repository: str,
    number: int,
    finding: Finding,
    comments: list[dict[str, Any]],
) -> EvidenceItem:
    replies: list[dict[str, str]] = []
    reactions: dict[str, int] = {}
    if finding.comment_id is not None:
        for comment in comments:
            if comment.get("in_reply_to_id") == finding.comment_id and _human(comment.get("user")):
                replies.append({"author": str(comment["user"].get("login")), "body": _excerpt(str(comment["body"]))})
        for reaction in await client.review_comment_reactions(authorization, repository, finding.comment_id):
            content = str(reaction.get("content"))
            reactions[content] = reactions.get(content, 0) + 1
    return EvidenceItem(
        id=f"P{number}.{finding.id}",
        kind="finding",
        pull_request=number,
        comment_id=finding.comment_id,
        finding_id=finding.id,
        path=finding.path,
        line=finding.start_line,
        body=_excerpt(f"{finding.title}\n\n{finding.description}"),
        severity=finding.severity.value,
        category=finding.category,
        status=finding.status.value,
        note=finding.note,
        closed_by=finding.closed_by,
        replies=replies,
        reactions=reactions,
    )


def analyzer_thread(host: str, repository: str) -> str:
    owner, _, name = repository.partition("/")
    return ids.analyzer(host, owner, name)


def continual_schedule_id(host: str, repository: str) -> str:
    return f"analyzer-continual:{host.lower()}:{repository.lower()}"


async def request_analysis(
    bus: Bus, redis: Redis, keys: Keys, *, host: str, repository: str, mode: Mode, requested_by: str
) -> str:
    """Ask the analyzer to run on ``repository``; returns its thread id. (The analyzer decides the
    mode from its progress: until bootstrap has finished, every run is a bootstrap.)"""
    thread_id = analyzer_thread(host, repository)
    text = (
        f"Learn the review guidelines of {repository} from its review history."
        if mode == "bootstrap"
        else f"Refine the review guidelines of {repository} from the outcomes of recent findings."
    )
    message = InboxMessage(
        delivery_id=f"analysis-{mode}-{repository.lower()}-{int(time.time())}",
        thread_id=thread_id,
        channel=Channel.SCHEDULER,
        author=Author(channel=Channel.SCHEDULER, external_id=requested_by, name=f"Drydock ({requested_by})"),
        text=text,
        repository=repository,
        references={"mode": mode, "requested_by": requested_by},
        reply_to=ReplyAddress(channel=Channel.SCHEDULER, address={"repository": repository}),
    )
    metadata = ThreadMetadataStore(redis, keys)
    await hand_off(bus, metadata, Role.ANALYZER, message, create=new_thread_fields(message, created_by=requested_by))
    return thread_id


async def finish_bootstrap(
    redis: Redis, keys: Keys, *, host: str, repository: str, thread_id: str, every: timedelta
) -> bool:
    """Mark the repository's bootstrap done and register its continual refinement; True if this
    call registered it (it is registered once, however often bootstrap finishes)."""
    await AnalysisProgress(redis, keys, host=host).set(
        repository, bootstrap=BootstrapState.DONE.value, bootstrapped_at=datetime.now(UTC).isoformat()
    )
    return await Schedules(redis, keys).ensure(
        continual_schedule_id(host, repository),
        thread_id,
        Role.ANALYZER,
        every,
        f"refine the review guidelines of {repository} from the outcomes of recent findings.",
        references={"mode": "continual", "repository": repository},
    )
