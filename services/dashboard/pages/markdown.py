"""Markdown the agent and people write (messages, replies, pull request bodies) as safe HTML:
markdown-it-py renders CommonMark with raw HTML switched off (it is shown as text), and nh3
(the Ammonia sanitizer) keeps only a list of harmless tags and attributes and http(s)/mailto
links. An image becomes a link to it: a page must not load anything from elsewhere."""

from __future__ import annotations

from collections.abc import Sequence

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererProtocol
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
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


def _image_as_link(
    renderer: RendererProtocol, tokens: Sequence[Token], index: int, options: OptionsDict, env: EnvType
) -> str:
    """An image becomes a link to it, named by its description, so that nothing is loaded."""
    token = tokens[index]
    alt = escapeHtml(token.content or "image")
    return f'<a href="{escapeHtml(str(token.attrGet("src") or ""))}">{alt}</a>'


_renderer.add_render_rule("image", _image_as_link)


def markdown(text: str | None) -> Markup:
    """``text`` (Markdown) as sanitized HTML, safe to put into a page as it is."""
    if not text:
        return Markup("")
    html = _renderer.render(text)
    clean = nh3.clean(
        html, tags=set(TAGS), attributes=ATTRIBUTES, url_schemes=set(SCHEMES), link_rel="noopener noreferrer nofollow"
    )
    return Markup(clean)
