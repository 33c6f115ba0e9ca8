"""The per-PR override command: a pull request comment ``@drydock autofix on`` or ``… off``,
read by :func:`drydock.channels.commands.autofix_command`. The handle is the team's mention handle.
"""

from __future__ import annotations

from drydock.autofix.policy import OverrideState
from drydock.channels.commands import autofix_command


def parse_command(text: str, handle: str) -> OverrideState | None:
    """The override ``text`` asks for when it addresses ``handle``; ``None`` if it is no command."""
    found = autofix_command(text)
    if found is None or found[0].lower() != handle.lower():
        return None
    return OverrideState(found[1])
