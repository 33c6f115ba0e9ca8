"""The commands a message can give the agent in any channel: ``approve`` (the owner's approval of
a plan or a held push) and the per-PR ``autofix on`` / ``autofix off``."""

from __future__ import annotations

import re

from drydock.channels.buttons import APPROVE_ACTION
from drydock.channels.text import without_mentions

_APPROVE = re.compile(r"[,:]?\s*approve\s*[.!]?", re.IGNORECASE)


def is_approve_command(text: str, handle: str, *, addressed: bool = False) -> bool:
    """Whether ``text`` is the command ``approve`` addressed to the agent: the whole message once
    mentions of ``handle`` (or Slack's mention of the bot) are removed, in a message that mentions
    it or is ``addressed`` to it (a direct message); or a press of the Approve button on Slack."""
    if text.startswith(f"[pressed {APPROVE_ACTION}]"):
        return addressed
    # Removing mentions over a long comment was a fifth of the ingress's CPU per delivery; a
    # text without the word cannot be the command (removing a mention only inserts a space).
    if "approve" not in text.lower():
        return False
    rest = without_mentions(text, handle)
    if rest is None:
        rest = " ".join(text.split()) if addressed else None
    return rest is not None and _APPROVE.fullmatch(rest) is not None


_AUTOFIX_COMMAND = re.compile(r"^\s*(@[A-Za-z0-9][A-Za-z0-9_.-]*)\s+autofix\s+(on|off)\s*\.?\s*$", re.IGNORECASE)


def autofix_command(text: str) -> tuple[str, str] | None:
    """The handle a pull request comment ``@drydock autofix on`` (or ``off``) addresses and the
    state it asks for (lower case), when the whole comment is that command (surrounding
    whitespace and a trailing period aside), so a sentence that merely mentions autofix is none."""
    found = _AUTOFIX_COMMAND.match(text)
    return None if found is None else (found.group(1), found.group(2).lower())


def looks_like_autofix_command(text: str) -> bool:
    """Whether ``text`` has the autofix command's shape for any handle (the ingress forwards those)."""
    return autofix_command(text) is not None
