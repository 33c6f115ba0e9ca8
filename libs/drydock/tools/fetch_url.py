"""``fetch_url``: read a public web page as text. HTML becomes Markdown-like text (headings,
lists, links, code blocks; scripts and styles dropped), JSON and plain text come back as they
are, anything else is declined before its body is read."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import httpx
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from drydock.tools.context import ToolContext
from drydock.tools.netguard import Fetched, FetchError, guarded_fetch, is_textual, media_type, text_of

NAME = "fetch_url"
_HTML = frozenset({"text/html", "application/xhtml+xml"})
_ACCEPT = "text/html, application/xhtml+xml, application/json;q=0.9, text/*;q=0.8"
_SKIPPED = frozenset({"script", "style", "noscript", "template", "svg", "iframe", "object"})
_BLOCKS = frozenset(
    {
        "p", "div", "section", "article", "header", "footer", "nav", "main", "aside", "table", "tr",
        "blockquote", "ul", "ol", "dl", "dt", "dd", "form", "figure", "figcaption", "details", "summary",
    }
)  # fmt: skip
_HEADINGS = {f"h{level}": level for level in range(1, 7)}


class _MarkdownText(HTMLParser):
    def __init__(self, base: httpx.URL) -> None:
        super().__init__(convert_charrefs=True)
        self._base = base
        self._out: list[str] = []
        self._skipping = 0
        self._pre = 0
        self._lists = 0
        self._links: list[tuple[str | None, int]] = []
        self._in_title = False
        self.title = ""

    def _block(self) -> None:
        self._out.append("\n\n")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED:
            self._skipping += 1
        if self._skipping:
            return
        if tag == "title":
            self._in_title = True
        elif tag in _HEADINGS:
            self._out += ["\n\n", "#" * _HEADINGS[tag], " "]
        elif tag in _BLOCKS:
            self._lists += tag in ("ul", "ol")
            self._block()
        elif tag == "li":
            self._out += ["\n", "  " * max(self._lists - 1, 0), "- "]
        elif tag == "br":
            self._out.append("\n")
        elif tag == "hr":
            self._out.append("\n\n---\n\n")
        elif tag == "pre":
            self._pre += 1
            self._out.append("\n\n```\n")
        elif tag == "code" and not self._pre:
            self._out.append("`")
        elif tag in ("td", "th"):
            self._out.append(" | ")
        elif tag == "a":
            self._links.append((dict(attrs).get("href"), len(self._out)))
        elif tag == "img":
            alt = dict(attrs).get("alt")
            if alt:
                self._out.append(f"[image: {alt}]")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self._skipping = max(self._skipping - 1, 0)
            return
        if self._skipping:
            return
        if tag == "title":
            self._in_title = False
        elif tag in _HEADINGS or tag in _BLOCKS:
            self._lists -= tag in ("ul", "ol") and self._lists > 0
            self._block()
        elif tag == "pre" and self._pre:
            self._pre -= 1
            self._out.append("\n```\n\n")
        elif tag == "code" and not self._pre:
            self._out.append("`")
        elif tag == "a" and self._links:
            self._link(*self._links.pop())

    def _link(self, href: str | None, start: int) -> None:
        text = " ".join("".join(self._out[start:]).split())
        if not href or not text or href.startswith(("#", "javascript:")):
            return
        try:
            target = str(self._base.join(href))
        except httpx.InvalidURL:
            return
        self._out[start:] = [f"[{text}]({target})"]

    def handle_data(self, data: str) -> None:
        if self._skipping:
            return
        if self._in_title:
            self.title += data
        elif self._pre:
            self._out.append(data)
        else:
            self._out.append(re.sub(r"\s+", " ", data))

    def text(self) -> str:
        lines: list[str] = []
        fenced = False
        for line in "".join(self._out).splitlines():
            if line.strip().startswith("```"):
                fenced = not fenced
                line = line.strip()
            lines.append(line.rstrip() if fenced else line.strip())
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def html_to_text(html: str, base: httpx.URL) -> tuple[str, str]:
    """The page's title and its readable text, links made absolute against ``base``."""
    parser = _MarkdownText(base)
    parser.feed(html)
    parser.close()
    return " ".join(parser.title.split()), parser.text()


class FetchUrlArgs(BaseModel):
    url: str = Field(description="The http(s) URL to read.")


def _readable(url: httpx.URL, headers: httpx.Headers) -> None:
    kind = media_type(headers)
    if kind and kind not in _HTML and not is_textual(kind):
        size = headers.get("content-length")
        raise FetchError(
            f"{url} is {kind}{f' ({size} bytes)' if size else ''}; fetch_url only reads HTML, JSON and text"
        )


def _describe(fetched: Fetched) -> str:
    lines = [f"URL: {fetched.url}"]
    if fetched.status_code != 200:
        lines.append(f"HTTP {fetched.status_code} {fetched.reason}".rstrip())
    text = text_of(fetched)
    if text is None:
        return f"{fetched.url} is binary content; fetch_url only reads HTML, JSON and text"
    if media_type(fetched.headers) in _HTML:
        title, text = html_to_text(text, fetched.url)
        if title:
            lines.insert(0, f"Title: {title}")
    if fetched.truncated:
        lines.append(f"[the page was cut at {len(fetched.body)} bytes]")
    return "\n".join(lines) + "\n\n" + text


def build(context: ToolContext) -> BaseTool:
    """The ``fetch_url`` tool, bound to the run's shared client and ``settings.tools``."""
    tools = context.settings.tools

    async def fetch_url(url: str) -> str:
        try:
            fetched = await guarded_fetch(
                context.http, "GET", url, tools=tools, headers={"accept": _ACCEPT}, accepts=_readable
            )
        except FetchError as error:
            return str(error)
        return _describe(fetched)

    return StructuredTool.from_function(
        coroutine=fetch_url,
        name=NAME,
        description=(
            "Read a public web page or document over http(s): HTML comes back as Markdown-like text, "
            "JSON and plain text as they are. Follows redirects; long pages are cut at a size limit."
        ),
        args_schema=FetchUrlArgs,
    )
