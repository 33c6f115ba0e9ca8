"""Reading what a message says to the agent: a mention of the handle, a ``repo:owner/name``,
a model choice (``model=… effort=…``)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from markdown_it import MarkdownIt

_REPOSITORY = re.compile(
    r"(?<![\w/-])repo:\s*<?(?:https?://[^/\s|>]+/)?([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?(?=[\s|>),.;:!?]|$)"
)


_MARKDOWN = MarkdownIt("commonmark")
_MARKUP = ("`", "~", "<", "    ", "\t", "![")
"""What can start code, HTML or an image in Markdown; text without any of them is all prose."""
MAX_PARSED = 8_000
"""Characters of text read as Markdown; a longer text (a pasted log) has only its backtick code
removed. Markdown's inline rules cost up to ~20 µs a character on crafted text (runs of ``![``),
and the ingress reads a delivery on its event loop."""
_BACKTICK_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.DOTALL)
_OPTION = re.compile(r"(?<![\w.=/-])(model|effort)\s*=\s*([A-Za-z0-9][\w.:/@+-]*)", re.IGNORECASE)


@functools.lru_cache(maxsize=16)
def _mention_pattern(handle: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w@/.-]){re.escape(handle)}(?![\w-])", re.IGNORECASE)


@functools.lru_cache(maxsize=32)
def prose(text: str) -> str:
    """``text`` without what Markdown (CommonMark) makes code or HTML: code spans, fenced and
    indented code blocks, HTML and its comments, and images' text; one line per paragraph (over
    :data:`MAX_PARSED` characters, without its backtick code only). Only a text that mentions the
    handle is read so; routing asks of one text more than once, hence the cache."""
    if not any(markup in text for markup in _MARKUP):
        return text
    if len(text) > MAX_PARSED:
        return _BACKTICK_CODE.sub(" ", text)
    lines = []
    for token in _MARKDOWN.parse(text):
        if token.type == "inline" and token.children:
            line = "".join(
                child.content if child.type == "text" else " "
                for child in token.children
                if child.type in {"text", "softbreak", "hardbreak"}
            )
            lines.append(line)
    return "\n".join(lines)


def mentions(text: str, handle: str) -> bool:
    """Whether ``text`` mentions ``handle`` (``@drydock``) as a word: not inside ``@drydock-bot``,
    an e-mail address, or code or HTML (as on GitHub, a handle in code notifies nobody)."""
    pattern = _mention_pattern(handle)
    if pattern.search(text) is None:
        return False
    return bool(pattern.search(prose(text)))


def repository_in(text: str) -> str | None:
    """The first ``repo:owner/name`` (or ``repo:https://host/owner/name``) in ``text``."""
    found = _REPOSITORY.search(text)
    if found is None or {found.group(1), found.group(2)} & {".", ".."}:
        return None
    return f"{found.group(1)}/{found.group(2)}"


_SLACK_MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")
_CODE_GROUP = "[2-9A-HJKMNP-TV-Z]{4}"
"""Four characters of a link code (:data:`drydock.accounts.link_codes.CODE_ALPHABET`)."""
_LINK_COMMAND = re.compile(rf"link\s+({_CODE_GROUP}[\s-]?{_CODE_GROUP}[\s-]?{_CODE_GROUP})", re.IGNORECASE)


def without_mentions(text: str, handle: str) -> str | None:
    """``text`` with its mentions of ``handle`` (and Slack user mentions) removed, whitespace
    collapsed; ``None`` when it mentions neither."""
    rest = _mention_pattern(handle).sub(" ", _SLACK_MENTION.sub(" ", text))
    return " ".join(rest.split()) if rest != text else None


def link_command(text: str, handle: str) -> str | None:
    """The code of a ``link CODE`` command (``@drydock link K7QX-…``, or ``link K7QX-…`` in a
    direct message): the whole message once mentions are removed; ``None`` for anything else."""
    rest = _mention_pattern(handle).sub(" ", _SLACK_MENTION.sub(" ", text))
    found = _LINK_COMMAND.fullmatch(" ".join(rest.split()))
    return found.group(1) if found else None


@dataclass(frozen=True)
class ModelRequest:
    """A model choice written into a message (``model=gpt-5.2 effort=high``); either part may be
    missing. Checked against the model catalog where the message is routed."""

    model: str | None = None
    effort: str | None = None


def model_request_in(text: str) -> ModelRequest | None:
    """The ``model=…`` and ``effort=…`` options in ``text`` outside code (the first of each, a
    value's trailing punctuation dropped), or ``None`` when it has neither."""
    # The pattern's case-insensitive alternation is tried at every position, which is slow on a
    # long comment; text without both parts has no option, so it is not searched.
    if "=" not in text:
        return None
    lowered = text.lower()
    if "model" not in lowered and "effort" not in lowered:
        return None
    options: dict[str, str] = {}
    for name, value in _OPTION.findall(prose(text)):
        options.setdefault(name.lower(), value.rstrip(".,;:!?)"))
    if not options:
        return None
    return ModelRequest(model=options.get("model"), effort=options.get("effort", "").lower() or None)
