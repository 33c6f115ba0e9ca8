from __future__ import annotations

from drydock.config import Settings
from drydock.tools import fetch_url
from tests.fakes.loopback import LoopbackServer
from tests.tools.conftest import MakeContext, with_tools


def local(settings: Settings, **tools: object) -> Settings:
    return with_tools(settings, allow_private_addresses=True, **tools)


class TestHtml:
    async def test_a_page_becomes_markdown_text(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = fetch_url.build(make_context(local(settings)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/page"})
        assert answer == (
            f"Title: Widgets manual\nURL: {site.base_url}/page\n\n"
            "skip\n\n# Installing widgets\n\n"
            f"Run the `widgets install` command, then read the [next step]({site.base_url}/guide?step=2).\n\n"
            "- fast\n- small & safe\n\n```\nwidgets install\nwidgets check\n```"
        )

    async def test_scripts_and_styles_are_dropped(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = fetch_url.build(make_context(local(settings)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/page"})
        assert "do-not-show" not in answer
        assert "color: red" not in answer
        assert "enable scripts" not in answer


class TestContentTypes:
    async def test_json_comes_back_as_it_is(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = fetch_url.build(make_context(local(settings)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/data.json"})
        assert answer == f'URL: {site.base_url}/data.json\n\n{{"name":"widgets","count":3}}'

    async def test_text_comes_back_as_it_is(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = fetch_url.build(make_context(local(settings)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/notes.txt"})
        assert answer == f"URL: {site.base_url}/notes.txt\n\nline one\nline two\n"

    async def test_binary_content_is_declined(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = fetch_url.build(make_context(local(settings)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/logo.png"})
        assert answer == f"{site.base_url}/logo.png is image/png (2056 bytes); fetch_url only reads HTML, JSON and text"

    async def test_an_error_status_is_shown_with_the_body(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = fetch_url.build(make_context(local(settings)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/status/503"})
        assert answer == f"URL: {site.base_url}/status/503\nHTTP 503 Service Unavailable\n\nanswered 503"


class TestLimits:
    async def test_a_large_body_is_cut(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = fetch_url.build(make_context(local(settings, fetch_max_bytes=2048)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/large"})
        header, text = answer.split("\n\n", 1)
        assert header.endswith("[the page was cut at 2048 bytes]")
        assert len(text) == 2048

    async def test_five_redirects_are_followed(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = fetch_url.build(make_context(local(settings)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/hops/5"})
        assert answer == f"URL: {site.base_url}/hops/0\n\narrived"

    async def test_a_sixth_redirect_is_not(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = fetch_url.build(make_context(local(settings)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/hops/6"})
        assert answer == f"gave up on {site.base_url}/hops/6: more than 5 redirects"

    async def test_a_slow_answer_is_abandoned(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = fetch_url.build(make_context(local(settings, timeout=0.2)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/slow"})
        assert answer == f"GET {site.base_url}/slow took longer than 0.2 s and was abandoned"


class TestPrivateAddresses:
    async def test_localhost_is_refused(self, make_context: MakeContext, site: LoopbackServer) -> None:
        tool = fetch_url.build(make_context())
        url = site.base_url.replace("127.0.0.1", "localhost") + "/page"
        answer = await tool.ainvoke({"url": url})
        assert answer.startswith(f"refused {url}: localhost resolves to a non-public address (")
        assert "127.0.0.1" in answer

    async def test_localhost_is_reached_with_the_flag(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = fetch_url.build(make_context(local(settings)))
        url = site.base_url.replace("127.0.0.1", "localhost") + "/notes.txt"
        answer = await tool.ainvoke({"url": url})
        assert answer == f"URL: {url}\n\nline one\nline two\n"
