"""Markdown the agent and people write (messages, replies, pull request bodies) as safe HTML:
markdown-it-py renders CommonMark with raw HTML switched off (it is shown as text), and nh3
(the Ammonia sanitizer) keeps only a list of harmless tags and attributes and http(s)/mailto
links. Images are dropped: a page must not load anything from elsewhere."""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

TAGS = frozenset(
    {
        "p", "br", "hr", "em", "strong", "del", "s", "code", "pre", "kbd", "blockquote", "a",
        "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6",
        "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}
SCHEMES = frozenset({"http", "https", "mailto"})

_renderer = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def markdown(text: str | None) -> Markup:
    """``text`` (Markdown) as sanitized HTML, safe to put into a page as it is."""
    if not text:
        return Markup("")
    html = _renderer.render(text)
    clean = nh3.clean(
        html, tags=set(TAGS), attributes=ATTRIBUTES, url_schemes=set(SCHEMES), link_rel="noopener noreferrer nofollow"
    )
    return Markup(clean)
