"""Which lines of a pull request a review comment may point at: the lines of its diff.

GitHub accepts a review comment only on a line inside a hunk of the file's patch, on the
``RIGHT`` side (the pull request's version: added and context lines, by new line number) or
the ``LEFT`` side (the base version: removed and context lines, by old line number). A
multi-line comment spans lines of one hunk on one side. :class:`DiffMap` is built from the
``patch`` texts of ``GET /repos/{owner}/{repo}/pulls/{number}/files`` and answers whether a
range is commentable, and if not, which ranges are.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class Side(StrEnum):
    RIGHT = "RIGHT"
    """The pull request's version of the file (new line numbers)."""
    LEFT = "LEFT"
    """The base version (old line numbers)."""


class AnchorError(ValueError):
    """The lines are not part of the pull request's diff; the message says which are."""


@dataclass
class _Hunk:
    # Sorted line numbers per side, and the text of each line.
    lines: dict[Side, dict[int, str]] = field(default_factory=lambda: {Side.RIGHT: {}, Side.LEFT: {}})

    def span(self, side: Side) -> tuple[int, int] | None:
        numbers = self.lines[side]
        return (min(numbers), max(numbers)) if numbers else None


@dataclass
class FileDiff:
    """The hunks of one changed file."""

    path: str
    status: str = "modified"
    previous_path: str | None = None
    hunks: list[_Hunk] = field(default_factory=list)
    _starts: dict[Side, list[tuple[int, int]]] = field(default_factory=dict)

    @classmethod
    def parse(
        cls, path: str, patch: str | None, *, status: str = "modified", previous_path: str | None = None
    ) -> FileDiff:
        """A file's diff from its unified ``patch`` (no patch: a binary or too large file)."""
        diff = cls(path, status, previous_path)
        hunk: _Hunk | None = None
        old = new = 0
        for line in (patch or "").splitlines():
            header = _HUNK.match(line)
            if header:
                hunk = _Hunk()
                diff.hunks.append(hunk)
                old, new = int(header.group(1)), int(header.group(3))
                continue
            if hunk is None or line.startswith("\\"):
                continue
            marker, text = line[:1], line[1:]
            if marker == "+":
                hunk.lines[Side.RIGHT][new] = text
                new += 1
            elif marker == "-":
                hunk.lines[Side.LEFT][old] = text
                old += 1
            else:
                hunk.lines[Side.RIGHT][new] = text
                hunk.lines[Side.LEFT][old] = text
                old += 1
                new += 1
        for side in Side:
            diff._starts[side] = sorted(
                (span[0], index) for index, hunk_ in enumerate(diff.hunks) if (span := hunk_.span(side))
            )
        return diff

    def _hunk_of(self, side: Side, line: int) -> _Hunk | None:
        starts = self._starts.get(side, [])
        position = bisect.bisect_right(starts, (line, len(self.hunks))) - 1
        if position < 0:
            return None
        hunk = self.hunks[starts[position][1]]
        return hunk if line in hunk.lines[side] else None

    def ranges(self, side: Side) -> list[tuple[int, int]]:
        """The commentable line ranges on ``side``, one per hunk."""
        return [span for hunk in self.hunks if (span := hunk.span(side))]

    def text(self, side: Side, start: int, end: int) -> list[str]:
        """The text of lines ``start``..``end`` on ``side`` that are in the diff."""
        hunk = self._hunk_of(side, start)
        return [hunk.lines[side][n] for n in range(start, end + 1) if n in hunk.lines[side]] if hunk else []

    def check(self, side: Side, start: int, end: int) -> None:
        """Raises :class:`AnchorError` unless ``start``..``end`` lie in one hunk on ``side``."""
        if start > end:
            raise AnchorError(f"the range {start}-{end} of {self.path} ends before it starts")
        hunk = self._hunk_of(side, start)
        if hunk is not None and all(n in hunk.lines[side] for n in range(start, end + 1)):
            return
        where = f"{self.path} line {start}" if start == end else f"{self.path} lines {start}-{end}"
        available = _describe(self.ranges(side))
        if not available:
            reason = "the file has no commentable lines (binary, too large, or only removed lines)"
            if side is Side.LEFT:
                reason = "the file has no removed or context lines on the LEFT side"
            raise AnchorError(f"{where} ({side.value}) is not in the pull request's diff: {reason}")
        raise AnchorError(
            f"{where} ({side.value}) is not in the pull request's diff (a range must lie within one hunk); "
            f"commentable on {side.value}: {available}"
        )


def _describe(ranges: list[tuple[int, int]], limit: int = 12) -> str:
    shown = [f"{a}" if a == b else f"{a}-{b}" for a, b in ranges[:limit]]
    more = f" and {len(ranges) - limit} more hunks" if len(ranges) > limit else ""
    return ", ".join(shown) + more


@dataclass
class DiffMap:
    """Every changed file of a pull request, by path."""

    files: dict[str, FileDiff]

    @classmethod
    def from_files(cls, files: Iterable[Mapping[str, object]]) -> DiffMap:
        """From GitHub's pull request files (``filename``, ``status``, ``patch``, ``previous_filename``)."""
        parsed = {}
        for item in files:
            path = str(item["filename"])
            patch = item.get("patch")
            previous = item.get("previous_filename")
            parsed[path] = FileDiff.parse(
                path,
                patch if isinstance(patch, str) else None,
                status=str(item.get("status") or "modified"),
                previous_path=previous if isinstance(previous, str) else None,
            )
        return cls(parsed)

    def file(self, path: str) -> FileDiff:
        """Raises :class:`AnchorError` for a path the pull request does not change."""
        found = self.files.get(path.lstrip("/"))
        if found is None:
            changed = ", ".join(sorted(self.files)[:20]) + (" …" if len(self.files) > 20 else "")
            raise AnchorError(f"{path} is not changed by the pull request (changed: {changed or 'nothing'})")
        return found

    def check(self, path: str, start: int, end: int, side: Side = Side.RIGHT) -> FileDiff:
        """The file, when ``start``..``end`` on ``side`` can carry a review comment; else
        :class:`AnchorError` saying what can."""
        diff = self.file(path)
        diff.check(side, start, end)
        return diff
