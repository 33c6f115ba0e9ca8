"""The per-PR override command: a pull request comment ``@drydock autofix on`` or ``… off``.

The whole comment is the command (surrounding whitespace and a trailing period aside), so a
sentence that merely mentions autofix never toggles it. The handle is the team's mention handle.
"""

from __future__ import annotations

import re

from drydock.autofix.policy import OverrideState

_SHAPE = re.compile(r"^\s*(@[A-Za-z0-9][A-Za-z0-9_.-]*)\s+autofix\s+(on|off)\s*\.?\s*$", re.IGNORECASE)


def looks_like_command(text: str) -> bool:
    """Whether ``text`` has the command's shape for any handle (the ingress forwards those)."""
    return _SHAPE.match(text) is not None


def parse_command(text: str, handle: str) -> OverrideState | None:
    """The override ``text`` asks for when it addresses ``handle``; ``None`` if it is no command."""
    found = _SHAPE.match(text)
    if found is None or found.group(1).lower() != handle.lower():
        return None
    return OverrideState(found.group(2).lower())
