"""Which paths file transfer may touch: the workspace and the daemon's other roots, after
resolving ``..`` and every symlink."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


class PathRefused(ValueError):
    """The path is malformed or lies outside every allowed root."""


class Confinement:
    """Resolves request paths against the workspace and refuses any that escape the roots.

    Relative paths are taken relative to the workspace. Resolution follows symlinks (also a
    dangling one, to where it points), so a link inside the workspace that points outside is
    refused like ``../`` or an absolute outside path.
    """

    def __init__(self, workspace: Path, extra_roots: Sequence[Path] = ()) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.roots = (self.workspace, *(Path(os.path.realpath(root)) for root in extra_roots))

    def resolve(self, raw: str) -> Path:
        if not raw or "\x00" in raw:
            raise PathRefused(f"{raw!r} is not a usable path")
        path = Path(raw)
        if not path.is_absolute():
            path = self.workspace / path
        real = Path(os.path.realpath(path))
        if not any(real == root or real.is_relative_to(root) for root in self.roots):
            raise PathRefused(f"{raw!r} is outside the workspace")
        return real
