"""Reading what a message says to the agent: a mention of the handle, a ``repo:owner/name``."""

from __future__ import annotations

import functools
import re

_REPOSITORY = re.compile(
    r"(?<![\w/-])repo:\s*<?(?:https?://[^/\s|>]+/)?([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?(?=[\s|>),.;:!?]|$)"
)


_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.DOTALL)


@functools.lru_cache(maxsize=16)
def _mention_pattern(handle: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w@/.-]){re.escape(handle)}(?![\w-])", re.IGNORECASE)


def mentions(text: str, handle: str) -> bool:
    """Whether ``text`` mentions ``handle`` (``@drydock``) as a word: not inside ``@drydock-bot``,
    an e-mail address, or code (as on GitHub, a handle in backticks notifies nobody)."""
    pattern = _mention_pattern(handle)
    if pattern.search(text) is None:
        return False
    return "`" not in text or bool(pattern.search(_CODE.sub(" ", text)))


def repository_in(text: str) -> str | None:
    """The first ``repo:owner/name`` (or ``repo:https://host/owner/name``) in ``text``."""
    found = _REPOSITORY.search(text)
    if found is None or {found.group(1), found.group(2)} & {".", ".."}:
        return None
    return f"{found.group(1)}/{found.group(2)}"
