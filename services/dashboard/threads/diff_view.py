"""A thread's changes (:mod:`drydock.threads.changes`, as the API shows them) as the diff view shows them: each file
with its counts and its part of the patch, line by line."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from services.dashboard.threads.schemas import ChangesOut

LineKind = Literal["add", "del", "hunk", "meta", "context"]
STATUS_WORDS = {"A": "added", "M": "modified", "D": "deleted", "T": "type changed"}


@dataclass(frozen=True)
class DiffLine:
    kind: LineKind
    text: str


@dataclass(frozen=True)
class FileDiff:
    path: str
    status: str
    additions: int | None
    deletions: int | None
    lines: list[DiffLine]
    anchor: str

    @property
    def binary(self) -> bool:
        return self.additions is None


def _kind(line: str) -> LineKind:
    if line.startswith("@@"):
        return "hunk"
    if line.startswith(("+++", "---", "index ", "new file", "deleted file", "old mode", "new mode", "Binary files")):
        return "meta"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return "context"


def _sections(patch: str) -> list[list[str]]:
    sections: list[list[str]] = []
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            sections.append([line])
        elif sections:
            sections[-1].append(line)
    return sections


def file_diffs(changes: ChangesOut) -> list[FileDiff]:
    """The changed files, each with its lines of the patch (none past a cut patch's end). git
    prints the file list and the patch in the same order, which pairs them."""
    sections = _sections(changes.patch)
    found: list[FileDiff] = []
    for number, change in enumerate(changes.files):
        section = sections[number] if number < len(sections) else []
        if section and not section[0].endswith(f" b/{change.path}"):
            section = []
        found.append(
            FileDiff(
                path=change.path,
                status=STATUS_WORDS.get(change.status, change.status),
                additions=change.additions,
                deletions=change.deletions,
                lines=[DiffLine(_kind(line), line) for line in section[1:]],
                anchor="diff-" + hashlib.sha1(change.path.encode(), usedforsecurity=False).hexdigest()[:12],
            )
        )
    return found
