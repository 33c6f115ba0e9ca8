"""The pull request a reviewer thread reviews, as of its current head: its facts and its diff.

The reviewer's run reads it from GitHub once (the pull request and its files with their
patches) and keeps it in Redis under the thread, so the finding and publishing tools of the run
(and a publish reconciled after a crash) anchor against the same head and diff. The parsed
:class:`~drydock.review.diff.DiffMap` is cached in the process per fetch: an optimization only.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field
from redis.asyncio import Redis

from drydock.github import GithubClient
from drydock.infra.redis import Keys
from drydock.review.diff import DiffMap

_CACHED_DIFFS = 32


class ChangedFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    path: str
    status: str = "modified"
    additions: int = 0
    deletions: int = 0
    patch: str | None = None
    previous_path: str | None = None


class ReviewTarget(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    repository: str
    number: int
    head_sha: str
    head_ref: str
    base_ref: str
    base_sha: str = ""
    title: str = ""
    body: str = ""
    url: str = ""
    author: str = ""
    state: str = "open"
    files: tuple[ChangedFile, ...] = ()
    fetched_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    def diff(self) -> DiffMap:
        """The commentable lines of the diff (parsed once per fetch in this process)."""
        key = (self.repository.lower(), self.number, self.head_sha, self.fetched_at.isoformat())
        found = _DIFFS.get(key)
        if found is None:
            found = DiffMap.from_files(
                {"filename": f.path, "status": f.status, "patch": f.patch, "previous_filename": f.previous_path}
                for f in self.files
            )
            _DIFFS[key] = found
            while len(_DIFFS) > _CACHED_DIFFS:
                _DIFFS.popitem(last=False)
        else:
            _DIFFS.move_to_end(key)
        return found


_DIFFS: OrderedDict[tuple[str, int, str, str], DiffMap] = OrderedDict()


def _changed(item: dict[str, Any]) -> ChangedFile:
    patch = item.get("patch")
    previous = item.get("previous_filename")
    return ChangedFile(
        path=str(item["filename"]),
        status=str(item.get("status") or "modified"),
        additions=int(item.get("additions") or 0),
        deletions=int(item.get("deletions") or 0),
        patch=patch if isinstance(patch, str) else None,
        previous_path=previous if isinstance(previous, str) else None,
    )


async def fetch_target(client: GithubClient, authorization: str, repository: str, number: int) -> ReviewTarget:
    """Read the pull request and its changed files from GitHub."""
    pull = await client.get_pull(authorization, repository, number)
    files = await client.list_pull_files(authorization, repository, number)
    head, base = pull.get("head") or {}, pull.get("base") or {}
    return ReviewTarget(
        repository=repository,
        number=number,
        head_sha=str(head.get("sha") or ""),
        head_ref=str(head.get("ref") or ""),
        base_ref=str(base.get("ref") or ""),
        base_sha=str(base.get("sha") or ""),
        title=str(pull.get("title") or ""),
        body=str(pull.get("body") or ""),
        url=str(pull.get("html_url") or ""),
        author=str((pull.get("user") or {}).get("login") or ""),
        state="merged" if pull.get("merged") else str(pull.get("state") or "open"),
        files=tuple(_changed(item) for item in files),
    )


class ReviewTargets:
    """The current review target of each reviewer thread."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def save(self, thread_id: str, target: ReviewTarget) -> None:
        await self._redis.set(self._keys.review_target(thread_id), target.model_dump_json())

    async def get(self, thread_id: str) -> ReviewTarget | None:
        raw = cast(str | None, await self._redis.get(self._keys.review_target(thread_id)))
        return None if raw is None else ReviewTarget.model_validate_json(raw)
