"""Publishing a reviewer thread's findings as one GitHub review.

:func:`publish` posts the open findings not yet on GitHub as the inline comments of one review
of the current head (``suggestion`` blocks where a finding has one), with a summary. Findings
below the severity threshold, beyond the cap, or whose lines left the diff are named in the
summary instead. Findings already posted are never posted again, so a re-review after a push
posts only what is new. Findings closed since (resolved or dismissed) get their note as a
reply in their review thread, which is then resolved; a reply the reviewer wrote on an open
finding is posted too.

Every posted comment carries a hidden marker (``<!-- drydock:finding:F3 -->``, replies
``<!-- drydock:reply:F3:<digest> -->``, the summary ``<!-- drydock:review:<head sha> -->``).
Before posting, the pull request's review comments are read and every marker found is
recorded, so a publish that crashed after GitHub accepted the review (but before the comment
ids were stored) is reconciled instead of repeated, and publishing twice posts once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import structlog
from redis.asyncio import Redis

from drydock.github import GithubClient
from drydock.infra.redis import Keys
from drydock.review.diff import AnchorError, DiffMap, Side
from drydock.review.findings import Finding, FindingStatus, FindingStore, Severity
from drydock.review.target import ReviewTarget

log = structlog.get_logger(__name__)

_FINDING_MARKER = re.compile(r"<!-- drydock:finding:(F\d+) -->")
_REPLY_MARKER = re.compile(r"<!-- drydock:reply:(F\d+):([0-9a-f]{12}) -->")
_REVIEW_MARKER = "<!-- drydock:review:{head_sha} -->"
_REVIEW_MARKER_PATTERN = re.compile(r"<!-- drydock:review:([0-9a-f]+) -->")
_SEVERITY_LABELS = {
    Severity.CRITICAL: "Critical",
    Severity.HIGH: "High",
    Severity.MEDIUM: "Medium",
    Severity.LOW: "Low",
    Severity.INFO: "Info",
}


@dataclass(frozen=True)
class PublishPolicy:
    """Which findings become inline comments: at least ``min_severity``, at most ``max_comments``."""

    min_severity: Severity = Severity.LOW
    max_comments: int = 20


@dataclass
class Published:
    """What one publish did."""

    review_id: int | None = None
    review_url: str | None = None
    posted: list[str] = field(default_factory=list)
    reconciled: list[str] = field(default_factory=list)
    """Findings found on GitHub by their marker (a publish that crashed before recording them)."""
    replied: list[str] = field(default_factory=list)
    resolved_threads: list[str] = field(default_factory=list)
    held_back: list[str] = field(default_factory=list)
    """Open findings not posted inline: below the threshold, beyond the cap, or out of the diff."""

    @property
    def nothing_new(self) -> bool:
        return self.review_id is None and not self.replied and not self.resolved_threads


def finding_marker(finding_id: str) -> str:
    return f"<!-- drydock:finding:{finding_id} -->"


def reply_marker(finding_id: str, text: str) -> str:
    """The hidden marker of a reply with ``text`` in a finding's thread."""
    return f"<!-- drydock:reply:{finding_id}:{hashlib.sha256(text.encode()).hexdigest()[:12]} -->"


def comment_body(finding: Finding) -> str:
    """The inline comment of a finding."""
    label = _SEVERITY_LABELS[finding.severity]
    parts = [f"**{label}** · {finding.category} · **{finding.title}**", finding.description.strip()]
    if finding.suggestion is not None:
        fence = "````" if "```" in finding.suggestion else "```"
        kind = "suggestion" if finding.side is Side.RIGHT else ""
        parts.append(f"{fence}{kind}\n{finding.suggestion.rstrip(chr(10))}\n{fence}")
    parts.append(f"<sub>Drydock reviewer · {finding.id} · confidence {finding.confidence:.0%}</sub>")
    parts.append(finding_marker(finding.id))
    return "\n\n".join(parts)


def _comment(finding: Finding) -> dict[str, Any]:
    comment: dict[str, Any] = {
        "path": finding.path,
        "line": finding.end_line,
        "side": finding.side.value,
        "body": comment_body(finding),
    }
    if finding.start_line != finding.end_line:
        comment |= {"start_line": finding.start_line, "start_side": finding.side.value}
    return comment


def _anchored(finding: Finding, diff: DiffMap) -> bool:
    try:
        diff.check(finding.path, finding.start_line, finding.end_line, finding.side)
    except AnchorError:
        return False
    return True


def _ordered(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (-f.severity.rank, -f.confidence, int(f.id[1:])))


def _summary(
    target: ReviewTarget,
    text: str,
    posted: Sequence[Finding],
    held_back: Sequence[tuple[Finding, str]],
    still_open: int,
    closed: Sequence[Finding],
) -> str:
    lines = [text.strip()] if text.strip() else []
    counts: dict[Severity, int] = {}
    for finding in posted:
        counts[finding.severity] = counts.get(finding.severity, 0) + 1
    tally = ", ".join(
        f"{count} {severity.value}" for severity, count in sorted(counts.items(), key=lambda i: -i[0].rank)
    )
    facts = [f"Reviewed `{target.head_sha[:12]}`: {len(posted)} new finding{'s' if len(posted) != 1 else ''}"]
    if tally:
        facts[0] += f" ({tally})"
    if still_open:
        facts.append(f"{still_open} earlier finding{'s' if still_open != 1 else ''} still open")
    if closed:
        facts.append(f"{len(closed)} resolved or dismissed since the last review")
    lines.append("; ".join(facts) + ".")
    if held_back:
        items = [f"- {f.id} ({f.severity.value}) `{f.path}:{f.lines()}` {f.title}: {why}" for f, why in held_back]
        lines.append("Not posted inline:\n" + "\n".join(items))
    lines.append(_REVIEW_MARKER.format(head_sha=target.head_sha))
    return "\n\n".join(lines)


async def publish(
    *,
    client: GithubClient,
    authorization: str,
    target: ReviewTarget,
    store: FindingStore,
    redis: Redis,
    keys: Keys,
    policy: PublishPolicy,
    summary: str = "",
) -> Published:
    """Publish the findings of ``store`` on ``target``'s pull request; see the module docstring."""
    repository, number = target.repository, target.number
    result = Published()
    findings = await store.all()
    comments: list[dict[str, Any]] | None = None
    if any(_may_be_on_github(finding) for finding in findings):
        comments = await client.list_review_comments(authorization, repository, number)
        findings = await _reconcile(store, redis, keys, findings, comments, result)

    diff = target.diff()
    candidates = _ordered(f for f in findings if f.status is FindingStatus.OPEN and not f.published)
    chosen: list[Finding] = []
    held_back: list[tuple[Finding, str]] = []
    for finding in candidates:
        if finding.severity.rank < policy.min_severity.rank:
            held_back.append((finding, f"below the {policy.min_severity.value} threshold"))
        elif not _anchored(finding, diff):
            held_back.append((finding, "its lines are no longer in the diff"))
        elif len(chosen) >= policy.max_comments:
            held_back.append((finding, f"beyond the cap of {policy.max_comments} comments"))
        else:
            chosen.append(finding)
    result.held_back = [finding.id for finding, _ in held_back]
    closed_since = [f for f in findings if f.status is not FindingStatus.OPEN and f.published and not f.thread_resolved]
    still_open = sum(1 for f in findings if f.status is FindingStatus.OPEN and f.published)

    if chosen or not await _reviewed_before(client, authorization, target, store, findings):
        body = _summary(target, summary, chosen, held_back, still_open, closed_since)
        review = await client.create_review(
            authorization,
            repository,
            number,
            commit_id=target.head_sha,
            body=body,
            comments=[_comment(finding) for finding in chosen],
        )
        result.review_id = int(review["id"])
        result.review_url = str(review.get("html_url") or "") or None
        await store.record_review(target.head_sha, result.review_id)
        if chosen:
            comments = await client.list_review_comments(authorization, repository, number)
            ids = _marked(comments)
            await _record(
                store, redis, keys, ids, [f.id for f in chosen if f.id in ids], target.head_sha, result.posted
            )
            findings = await store.all()

    await _replies(client, authorization, target, store, findings, comments, result)
    await _resolve_threads(client, authorization, target, store, result)
    return result


def _may_be_on_github(finding: Finding) -> bool:
    """A finding that may have a comment or reply on GitHub this store does not know of yet."""
    if not finding.published:
        return finding.status is FindingStatus.OPEN
    return finding.reply is not None


def _marked(comments: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Review comments carrying a finding marker, by finding id (the first one of each)."""
    found: dict[str, dict[str, Any]] = {}
    for comment in comments:
        match = _FINDING_MARKER.search(str(comment.get("body") or ""))
        if match and comment.get("in_reply_to_id") is None:
            found.setdefault(match.group(1), comment)
    return found


async def _reconcile(
    store: FindingStore,
    redis: Redis,
    keys: Keys,
    findings: list[Finding],
    comments: list[dict[str, Any]],
    result: Published,
) -> list[Finding]:
    marked = _marked(comments)
    lost = [f.id for f in findings if not f.published and f.id in marked]
    if not lost:
        return findings
    log.warning("reconciling findings published by an earlier attempt", thread_id=store.thread_id, findings=lost)
    await _record(store, redis, keys, marked, lost, None, result.reconciled)
    return await store.all()


async def _record(
    store: FindingStore,
    redis: Redis,
    keys: Keys,
    marked: dict[str, dict[str, Any]],
    finding_ids: list[str],
    head_sha: str | None,
    into: list[str],
) -> None:
    """Store the comment of each finding, and index the comments for routing replies."""
    if not finding_ids:
        return

    def change(found: list[Finding]) -> list[Finding]:
        return [
            finding.model_copy(
                update={
                    "comment_id": int(marked[finding.id]["id"]),
                    "review_id": marked[finding.id].get("pull_request_review_id"),
                    "published_sha": head_sha or marked[finding.id].get("commit_id") or finding.last_confirmed_sha,
                }
            )
            for finding in found
        ]

    await store.update_many(finding_ids, change)
    async with redis.pipeline(transaction=False) as pipe:
        for finding_id in finding_ids:
            pipe.set(keys.finding_comment(store.host, store.repository, marked[finding_id]["id"]), store.thread_id)
        await pipe.execute()
    into.extend(finding_ids)


async def _reviewed_before(
    client: GithubClient, authorization: str, target: ReviewTarget, store: FindingStore, findings: list[Finding]
) -> bool:
    """Whether a review of the pull request was published before: recorded in the store, or
    found by its marker on GitHub (a publish that crashed before recording it)."""
    if await store.reviews() or any(finding.published for finding in findings):
        return True
    for review in await client.list_reviews(authorization, target.repository, target.number):
        match = _REVIEW_MARKER_PATTERN.search(str(review.get("body") or ""))
        if match:
            await store.record_review(match.group(1), int(review["id"]))
            return True
    return False


async def _replies(
    client: GithubClient,
    authorization: str,
    target: ReviewTarget,
    store: FindingStore,
    findings: list[Finding],
    comments: list[dict[str, Any]] | None,
    result: Published,
) -> None:
    pending = [f for f in findings if f.published and f.reply is not None]
    if not pending:
        return
    if comments is None:
        comments = await client.list_review_comments(authorization, target.repository, target.number)
    posted = {match.group(0) for comment in comments if (match := _REPLY_MARKER.search(str(comment.get("body") or "")))}
    for finding in pending:
        reply = cast(str, finding.reply)
        marker = reply_marker(finding.id, reply)
        if marker not in posted:
            body = f"{reply.strip()}\n\n{marker}"
            await client.reply_in_review_thread(
                authorization, target.repository, target.number, cast(int, finding.comment_id), body
            )
        await store.update(finding.id, _reply_sent(reply))
        result.replied.append(finding.id)


async def _resolve_threads(
    client: GithubClient, authorization: str, target: ReviewTarget, store: FindingStore, result: Published
) -> None:
    closing = [
        f for f in await store.all() if f.status is not FindingStatus.OPEN and f.published and not f.thread_resolved
    ]
    if not closing:
        return
    threads = await client.review_threads(authorization, target.repository, target.number)
    by_comment: dict[int, dict[str, Any]] = {}
    for node in threads:
        first = ((node.get("comments") or {}).get("nodes") or [{}])[0]
        if first.get("databaseId") is not None:
            by_comment[int(first["databaseId"])] = node
    for finding in closing:
        found = by_comment.get(cast(int, finding.comment_id))
        if found is None:
            log.warning("no review thread for a finding's comment", thread_id=store.thread_id, finding=finding.id)
            continue
        if not found.get("isResolved"):
            await client.resolve_review_thread(authorization, str(found["id"]))
        await store.update(finding.id, _thread_resolved(str(found["id"])))
        result.resolved_threads.append(finding.id)


def _reply_sent(sent: str) -> Callable[[Finding], Finding]:
    def change(finding: Finding) -> Finding:
        return finding.model_copy(update={"reply": None}) if finding.reply == sent else finding

    return change


def _thread_resolved(node_id: str) -> Callable[[Finding], Finding]:
    def change(finding: Finding) -> Finding:
        return finding.model_copy(update={"thread_resolved": True, "review_thread_id": node_id})

    return change
