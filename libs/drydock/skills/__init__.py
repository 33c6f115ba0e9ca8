"""Skills: procedures the agents follow, served as virtual, versioned, read-only files.

Each skill is a directory of this package holding a ``SKILL.md`` whose front matter names it,
describes when to use it and carries its version (``metadata.version``). :func:`skill_files`
reads them from the package; the analyzer's graph serves them under :data:`SKILLS_ROUTE`
through a :class:`~drydock.skills.read_only_files.ReadOnlyFiles` route of its backend, so they
are never copied into a sandbox and cannot be changed by the agent.
"""

from __future__ import annotations

import functools
from importlib import resources

from drydock.skills.read_only_files import ReadOnlyFiles, with_read_only_routes

SKILLS_ROUTE = "/skills/"
ANALYZER_SKILLS = ("analyzer-bootstrap", "analyzer-continual")


@functools.cache
def skill_files(names: tuple[str, ...] = ANALYZER_SKILLS) -> ReadOnlyFiles:
    """The named skills' files, as read-only files under ``/<name>/`` (routed at :data:`SKILLS_ROUTE`),
    read once per process: they ship with the package."""
    root = resources.files(__name__)
    files: dict[str, str] = {}
    for name in names:
        directory = root / name
        for entry in directory.iterdir():
            if entry.is_file():
                files[f"/{name}/{entry.name}"] = entry.read_text(encoding="utf-8")
    return ReadOnlyFiles(files)


__all__ = ["ANALYZER_SKILLS", "SKILLS_ROUTE", "ReadOnlyFiles", "skill_files", "with_read_only_routes"]
