"""A repository's review guidelines: versioned, with provenance and an approval state.

The analyzer saves a new version after each bootstrap or continual run; a person may approve,
reject or edit one (the dashboard). The reviewer appends the **current** version, the newest
approved one, to its prompt. Versions are never changed after they are written, only their
approval state; an edit is a new version based on an older one.

Redis: per repository a hash of versions (number → JSON), a counter, and a hash of approval
states, under one hash tag so that allocating a number and writing the version is one script.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field
from redis.asyncio import Redis

from drydock.accounts.records import repository_name
from drydock.infra.redis import Keys

MAX_RULES = 100

# KEYS: counter, versions, approvals. ARGV: version JSON, approval JSON or "".
_SAVE = """
local version = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[2], version, ARGV[1])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[3], version, ARGV[2]) end
return version
"""

# KEYS: versions, approvals. ARGV: version, approval JSON.
_REVIEW = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1
"""


class UnknownVersion(LookupError):
    """The repository has no guidelines of that version."""


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class GuidelineSource(Record):
    """What a rule was learned from: a person's review comment on a merged pull request, or the
    outcome of one of the reviewer's findings."""

    kind: Literal["review_comment", "finding"]
    pull_request: int
    comment_id: int | None = None
    finding_id: str | None = None
    url: str | None = None
    author: str | None = None
    excerpt: str | None = Field(default=None, max_length=500)


class Guideline(Record):
    """One rule the reviewer should apply."""

    text: str = Field(min_length=1, max_length=2000)
    category: str | None = Field(default=None, max_length=60)
    sources: tuple[GuidelineSource, ...] = ()


class Provenance(Record):
    """How a version came to be."""

    mode: Literal["bootstrap", "continual", "edit"]
    summary: str = Field(default="", max_length=4000)
    based_on: int | None = None
    """The version this one refines or edits."""
    thread_id: str | None = None
    run_id: str | None = None
    by: str | None = None
    """The person who edited it (mode ``edit``)."""
    evidence: dict[str, int] = Field(default_factory=dict)
    """How much the analyzer looked at: pull requests, comments, findings."""


class ApprovalState(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class Approval(Record):
    state: ApprovalState = ApprovalState.PENDING
    by: str | None = None
    at: datetime | None = None
    note: str = ""


class _Stored(Record):
    rules: tuple[Guideline, ...]
    provenance: Provenance
    created_at: datetime


class GuidelinesVersion(Record):
    repository: str
    version: int
    rules: tuple[Guideline, ...]
    provenance: Provenance
    created_at: datetime
    approval: Approval = Field(default_factory=Approval)

    @property
    def approved(self) -> bool:
        return self.approval.state is ApprovalState.APPROVED


def render(guidelines: GuidelinesVersion) -> str:
    """The rules as a Markdown list, for a prompt."""
    lines = []
    for number, rule in enumerate(guidelines.rules, 1):
        category = f"[{rule.category}] " if rule.category else ""
        lines.append(f"{number}. {category}{rule.text}")
    return "\n".join(lines)


class GuidelinesStore:
    """Review guidelines of the repositories of one code host."""

    def __init__(self, redis: Redis, keys: Keys, *, host: str) -> None:
        self._redis = redis
        self._keys = keys
        self.host = host
        self._save = redis.register_script(_SAVE)
        self._review = redis.register_script(_REVIEW)

    def _versions(self, repository: str) -> str:
        return self._keys.guidelines(self.host, repository_name(repository))

    def _approvals(self, repository: str) -> str:
        return self._keys.guidelines_approvals(self.host, repository_name(repository))

    async def save(
        self,
        repository: str,
        rules: Sequence[Guideline],
        provenance: Provenance,
        *,
        approved_by: str | None = None,
    ) -> int:
        """Store a new version of ``repository``'s guidelines; returns its number (1, 2, …).
        It is pending unless ``approved_by`` names who approved it."""
        if len(rules) > MAX_RULES:
            raise ValueError(f"at most {MAX_RULES} rules, not {len(rules)}")
        now = datetime.now(UTC)
        stored = _Stored(rules=tuple(rules), provenance=provenance, created_at=now)
        approval = Approval(state=ApprovalState.APPROVED, by=approved_by, at=now) if approved_by else None
        version = await self._save(
            keys=[
                self._keys.guidelines_counter(self.host, repository_name(repository)),
                self._versions(repository),
                self._approvals(repository),
            ],
            args=[stored.model_dump_json(), approval.model_dump_json() if approval else ""],
        )
        return int(version)

    async def edit(self, repository: str, rules: Sequence[Guideline], *, by: str, based_on: int | None = None) -> int:
        """A person's own version (approved by them), based on ``based_on``; returns its number."""
        if based_on is not None and await self.get(repository, based_on) is None:
            raise UnknownVersion(f"{repository} has no guidelines version {based_on}")
        provenance = Provenance(mode="edit", based_on=based_on, by=by)
        return await self.save(repository, rules, provenance, approved_by=by)

    async def approve(self, repository: str, version: int, *, by: str, note: str = "") -> GuidelinesVersion:
        """Approve ``version``: the reviewer uses it while it is the newest approved one."""
        return await self._set_approval(repository, version, Approval(state=ApprovalState.APPROVED, by=by, note=note))

    async def reject(self, repository: str, version: int, *, by: str, note: str = "") -> GuidelinesVersion:
        """Reject ``version``; the reviewer keeps using the newest approved one."""
        return await self._set_approval(repository, version, Approval(state=ApprovalState.REJECTED, by=by, note=note))

    async def _set_approval(self, repository: str, version: int, approval: Approval) -> GuidelinesVersion:
        stamped = approval.model_copy(update={"at": datetime.now(UTC)})
        written = await self._review(
            keys=[self._versions(repository), self._approvals(repository)],
            args=[str(version), stamped.model_dump_json()],
        )
        if not written:
            raise UnknownVersion(f"{repository} has no guidelines version {version}")
        found = await self.get(repository, version)
        assert found is not None
        return found

    async def get(self, repository: str, version: int) -> GuidelinesVersion | None:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hget(self._versions(repository), str(version))
            pipe.hget(self._approvals(repository), str(version))
            raw, approval = cast(list[str | None], await pipe.execute())
        return None if raw is None else _version(repository, version, raw, approval)

    async def history(self, repository: str) -> list[GuidelinesVersion]:
        """Every version of ``repository``'s guidelines, newest first."""
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self._versions(repository))
            pipe.hgetall(self._approvals(repository))
            raws, approvals = cast(list[dict[str, str]], await pipe.execute())
        found = [_version(repository, int(number), raw, approvals.get(number)) for number, raw in raws.items()]
        return sorted(found, key=lambda item: item.version, reverse=True)

    async def latest(self, repository: str) -> GuidelinesVersion | None:
        """The newest version, whatever its approval state."""
        history = await self.history(repository)
        return history[0] if history else None

    async def current(self, repository: str) -> GuidelinesVersion | None:
        """The newest approved version: the guidelines the reviewer applies."""
        return next((item for item in await self.history(repository) if item.approved), None)


def _version(repository: str, version: int, raw: str, approval: str | None) -> GuidelinesVersion:
    stored = _Stored.model_validate_json(raw)
    return GuidelinesVersion(
        repository=repository,
        version=version,
        rules=stored.rules,
        provenance=stored.provenance,
        created_at=stored.created_at,
        approval=Approval.model_validate_json(approval) if approval else Approval(),
    )
