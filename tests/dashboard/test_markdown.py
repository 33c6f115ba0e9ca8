"""Markdown on the thread page is rendered, and nothing in it runs or loads."""

from __future__ import annotations

from services.dashboard.pages.markdown import markdown


class TestMarkdown:
    def test_common_markdown_is_rendered(self) -> None:
        html = markdown("**Fixed** `add()`:\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |")
        assert "<strong>Fixed</strong> <code>add()</code>" in html
        assert "<li>one</li>" in html
        assert "<td>1</td>" in html

    def test_raw_html_is_shown_as_text(self) -> None:
        html = markdown('<script>alert(1)</script> <img src=x onerror="alert(2)">')
        assert "<script" not in html
        assert "<img" not in html
        assert "&lt;script&gt;" in html

    def test_links_keep_only_safe_schemes_and_an_image_is_a_link(self) -> None:
        html = markdown(
            "[a](javascript:alert(1)) [b](https://example.com/x) ![the <chart>](https://example.com/c.png) "
            "![x](javascript:alert(2))"
        )
        assert 'href="javascript' not in html
        assert '<a href="https://example.com/x" rel="noopener noreferrer nofollow">b</a>' in html
        assert '<a href="https://example.com/c.png" rel="noopener noreferrer nofollow">the &lt;chart&gt;</a>' in html
        assert "<img" not in html

    def test_nothing_is_empty(self) -> None:
        assert markdown(None) == ""
        assert markdown("") == ""
