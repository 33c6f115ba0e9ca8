"""The errors a snapshot operation raises; each message names the thread."""

from __future__ import annotations


class SnapshotError(RuntimeError):
    """A snapshot could not be saved or restored. Nothing half-done is left in its place."""


class SnapshotCorrupt(SnapshotError):
    """A stored snapshot is damaged or incomplete; nothing was restored from it."""
