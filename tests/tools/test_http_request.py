from __future__ import annotations

from urllib.parse import quote

import pytest

from drydock.config import Settings
from drydock.tools import http_request
from tests.fakes.loopback import LoopbackServer
from tests.tools.conftest import PNG, MakeContext, echoed, with_tools


def allowing(settings: Settings, site: LoopbackServer, *, allow_private: bool = True) -> Settings:
    host_port = site.base_url.removeprefix("http://")
    return with_tools(settings, http_allowlist=[host_port], allow_private_addresses=allow_private, fetch_max_bytes=1024)


class TestAllowlist:
    async def test_an_empty_allowlist_turns_the_tool_off(self, make_context: MakeContext, site: LoopbackServer) -> None:
        tool = http_request.build(make_context())
        answer = await tool.ainvoke({"url": f"{site.base_url}/echo"})
        assert answer.startswith("http_request is off")
        assert "DRYDOCK_TOOLS_HTTP_ALLOWLIST" in answer

    async def test_a_host_off_the_list_is_refused(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = http_request.build(make_context(with_tools(settings, http_allowlist=["api.example.com"])))
        answer = await tool.ainvoke({"url": f"{site.base_url}/echo"})
        port = site.base_url.rsplit(":", 1)[1]
        assert answer == (
            f"refused: 127.0.0.1:{port} is not on the http_request allowlist (allowed: api.example.com). "
            "An administrator can add it to DRYDOCK_TOOLS_HTTP_ALLOWLIST."
        )

    async def test_an_allowed_host_is_reached(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = http_request.build(make_context(allowing(settings, site)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/data.json"})
        assert answer == 'HTTP 200 OK\ncontent-type: application/json\n\n{"name":"widgets","count":3}'

    async def test_a_redirect_off_the_list_is_refused(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = http_request.build(make_context(allowing(settings, site)))
        elsewhere = site.base_url.replace("127.0.0.1", "localhost") + "/echo"
        answer = await tool.ainvoke({"url": f"{site.base_url}/redirect?to={quote(elsewhere)}"})
        assert answer.startswith("refused: localhost:")
        assert "not on the http_request allowlist" in answer

    async def test_an_unreadable_entry_fails_the_build(self, make_context: MakeContext, settings: Settings) -> None:
        with pytest.raises(ValueError, match=r"DRYDOCK_TOOLS_HTTP_ALLOWLIST: 'https://api\.example\.com'"):
            http_request.build(make_context(with_tools(settings, http_allowlist=["https://api.example.com"])))


class TestPrivateAddresses:
    async def test_an_allowlisted_loopback_host_is_refused_without_the_flag(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = http_request.build(make_context(allowing(settings, site, allow_private=False)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/echo"})
        assert "resolves to a non-public address (127.0.0.1)" in answer
        assert "DRYDOCK_TOOLS_ALLOW_PRIVATE_ADDRESSES" in answer


class TestRequest:
    async def test_a_json_body_is_sent_as_json(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = http_request.build(make_context(allowing(settings, site)))
        answer = await tool.ainvoke({"method": "post", "url": f"{site.base_url}/echo", "json_body": {"a": [1, 2]}})
        request = echoed(answer)
        assert request["method"] == "POST"
        assert request["headers"]["content-type"] == "application/json"
        assert request["body"] == '{"a": [1, 2]}'

    async def test_a_raw_body_and_the_models_headers_are_sent(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = http_request.build(make_context(allowing(settings, site)))
        answer = await tool.ainvoke(
            {
                "method": "PUT",
                "url": f"{site.base_url}/echo",
                "headers": {"Authorization": "Bearer model-given", "Content-Type": "text/plain"},
                "body": "hello",
            }
        )
        request = echoed(answer)
        assert (request["method"], request["body"]) == ("PUT", "hello")
        assert request["headers"]["authorization"] == "Bearer model-given"

    async def test_nothing_of_ours_is_added(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = http_request.build(make_context(allowing(settings, site)))
        await tool.ainvoke({"url": f"{site.base_url}/set-cookie"})
        request = echoed(await tool.ainvoke({"url": f"{site.base_url}/echo"}))
        assert set(request["headers"]) == {"host", "user-agent", "accept-encoding"}

    async def test_a_host_header_cannot_redirect_the_request(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = http_request.build(make_context(allowing(settings, site)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/echo", "headers": {"Host": "internal.example"}})
        assert echoed(answer)["headers"]["host"] == site.base_url.removeprefix("http://")

    async def test_selected_headers_are_shown(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = http_request.build(make_context(allowing(settings, site)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/echo"})
        assert 'link: <https://example.com/?page=2>; rel="next"' in answer
        assert "x-echo" not in answer

    async def test_head_has_no_body(self, make_context: MakeContext, settings: Settings, site: LoopbackServer) -> None:
        tool = http_request.build(make_context(allowing(settings, site)))
        answer = await tool.ainvoke({"method": "HEAD", "url": f"{site.base_url}/echo"})
        assert answer == 'HTTP 200 OK\ncontent-type: application/json\nlink: <https://example.com/?page=2>; rel="next"'

    async def test_an_error_status_is_returned_not_raised(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = http_request.build(make_context(allowing(settings, site)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/status/404"})
        assert answer == "HTTP 404 Not Found\ncontent-type: text/plain; charset=utf-8\n\nanswered 404"

    async def test_body_and_json_together_are_refused(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = http_request.build(make_context(allowing(settings, site)))
        answer = await tool.ainvoke({"method": "POST", "url": f"{site.base_url}/echo", "body": "x", "json_body": 1})
        assert answer == "give either body or json_body, not both"

    async def test_a_redirect_on_the_list_is_followed(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = http_request.build(make_context(allowing(settings, site)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/hops/2"})
        assert answer.splitlines()[:2] == ["HTTP 200 OK", f"final URL: {site.base_url}/hops/0"]
        assert answer.endswith("arrived")


class TestBody:
    async def test_a_large_body_is_cut_at_the_limit(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = http_request.build(make_context(allowing(settings, site)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/large"})
        body, note = answer.split("\n\n", 1)[1].rsplit("\n", 1)
        assert len(body) == 1024
        assert note == "[body truncated at 1024 bytes]"

    async def test_binary_content_is_not_shown(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        tool = http_request.build(make_context(allowing(settings, site)))
        answer = await tool.ainvoke({"url": f"{site.base_url}/logo.png"})
        assert (
            answer
            == "HTTP 200 OK\ncontent-type: image/png\n\n[binary content (image/png), 1024 or more bytes, not shown]"
        )
        assert len(PNG) > 1024
