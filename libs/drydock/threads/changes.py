"""What a thread's checkout changed: the files and the diff against the commit its branch started
from, committed or not, read from the sandbox's git at the end of each run and kept for the
dashboard (one record per thread, the latest).

The agent changes files in many ways (``write_file``, ``edit_file``, ``sed`` through ``execute``,
a ``git apply``), so the tool calls do not tell which files changed; git does. The diff is taken
through a throwaway copy of the index, so the agent's own index (what it staged) is left as it
was; the only trace is the blobs of new and changed files in the object store, unreferenced
until the agent commits them (``git gc`` collects them otherwise).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import cast

from redis.asyncio import Redis

from drydock.infra.redis import Keys

PATCH_LIMIT = 200_000
"""Bytes of the diff kept at most; the file list is always whole."""
FILES_LIMIT = 1000
KEEP = timedelta(days=30)
"""How long a thread's changes are kept after its last run: the store stays bounded."""
_MARK = "@@drydock-changes"


@dataclass(frozen=True)
class FileChange:
    path: str
    status: str
    """git's letter: A added, M modified, D deleted, T type changed."""
    additions: int | None
    """None for a binary file."""
    deletions: int | None


@dataclass(frozen=True)
class Changes:
    base: str
    """The commit the diff is against: where the branch left the default branch."""
    files: list[FileChange]
    patch: str
    truncated: bool
    """The patch was cut at :data:`PATCH_LIMIT`."""
    at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def to_json(self) -> str:
        return json.dumps(asdict(self) | {"at": self.at.isoformat()})

    @classmethod
    def from_json(cls, raw: str) -> Changes:
        data = json.loads(raw)
        return cls(
            base=str(data["base"]),
            files=[FileChange(**item) for item in data["files"]],
            patch=str(data["patch"]),
            truncated=bool(data["truncated"]),
            at=datetime.fromisoformat(data["at"]),
        )


def diff_script(path: str, default_branch: str | None) -> str:
    """The shell script that prints a checkout's changes in the sections :func:`parse` reads."""
    where = shlex.quote(path)
    upstream = shlex.quote(f"origin/{default_branch}") if default_branch else "HEAD"
    git = "git -c core.quotePath=false"
    return "\n".join(
        [
            "set -e",
            f"cd {where}",
            f"base=$(git merge-base HEAD {upstream} 2>/dev/null || git rev-parse HEAD)",
            "index=$(mktemp); trap 'rm -f \"$index\"' EXIT",
            # A copy of the agent's index keeps git's file stat cache: only changed files are read.
            "real=$(git rev-parse --git-path index)",
            'if [ -f "$real" ]; then cp "$real" "$index"; else GIT_INDEX_FILE="$index" git read-tree HEAD; fi',
            'export GIT_INDEX_FILE="$index"',
            "git add -A . >/dev/null 2>&1",
            f'echo "{_MARK} base $base"',
            f'echo "{_MARK} status"',
            f'{git} diff --cached --no-renames --name-status "$base"',
            f'echo "{_MARK} numstat"',
            f'{git} diff --cached --no-renames --numstat "$base"',
            f'echo "{_MARK} patch"',
            f'{git} diff --cached --no-renames --no-color "$base" | head -c {PATCH_LIMIT + 1}',
        ]
    )


def parse(output: str) -> Changes | None:
    """The changes in the output of :func:`diff_script`; None when it is not that output."""
    sections: dict[str, list[str]] = {}
    base, current = "", None
    lines = output.split("\n")
    for number, line in enumerate(lines):
        if line.startswith(f"{_MARK} "):
            name = line.removeprefix(f"{_MARK} ")
            if name.startswith("base "):
                base = name.removeprefix("base ").strip()
                continue
            current = name
            sections[current] = []
            if current == "patch":
                sections[current] = lines[number + 1 :]
                break
            continue
        if current is not None:
            sections[current].append(line)
    if not base or "patch" not in sections:
        return None
    statuses = {}
    for line in sections.get("status", []):
        letter, _, name = line.partition("\t")
        if name:
            statuses[name] = letter[:1]
    files: list[FileChange] = []
    for line in sections.get("numstat", []):
        parts = line.split("\t", 2)
        if len(parts) != 3:
            continue
        added, deleted, name = parts
        files.append(
            FileChange(
                path=name,
                status=statuses.get(name, "M"),
                additions=int(added) if added.isdigit() else None,
                deletions=int(deleted) if deleted.isdigit() else None,
            )
        )
    patch = "\n".join(sections["patch"])
    truncated = len(patch.encode()) > PATCH_LIMIT
    if truncated:
        patch = patch.encode()[:PATCH_LIMIT].decode(errors="ignore")
        patch = patch[: patch.rfind("\n") + 1]
    return Changes(base=base, files=files[:FILES_LIMIT], patch=patch, truncated=truncated)


class ThreadChanges:
    """The latest :class:`Changes` of each thread, in Redis."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def save(self, thread_id: str, changes: Changes) -> None:
        await self._redis.set(self._keys.thread_changes(thread_id), changes.to_json(), ex=KEEP)

    async def get(self, thread_id: str) -> Changes | None:
        raw = cast(str | None, await self._redis.get(self._keys.thread_changes(thread_id)))
        return Changes.from_json(raw) if raw else None
