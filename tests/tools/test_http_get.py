"""``http_get``: ``http_request`` limited to GET, with the same allowlist."""

from __future__ import annotations

from drydock.config import Settings
from drydock.tools import http_get
from tests.fakes.loopback import LoopbackServer
from tests.tools.conftest import MakeContext, echoed, with_tools


class TestHttpGet:
    async def test_it_gets_an_allowed_url(
        self, make_context: MakeContext, settings: Settings, site: LoopbackServer
    ) -> None:
        allowed = with_tools(
            settings, http_allowlist=[site.base_url.removeprefix("http://")], allow_private_addresses=True
        )
        tool = http_get.build(make_context(allowed))
        answer = await tool.ainvoke({"url": f"{site.base_url}/echo", "headers": {"x-api": "1"}})
        assert answer.startswith("HTTP 200")
        body = echoed(answer)
        assert (body["method"], body["headers"]["x-api"]) == ("GET", "1")

    async def test_it_has_no_method_or_body_to_give(self, make_context: MakeContext) -> None:
        tool = http_get.build(make_context())
        assert set(tool.args) == {"url", "headers"}

    async def test_a_host_off_the_list_is_refused(self, make_context: MakeContext, site: LoopbackServer) -> None:
        tool = http_get.build(make_context())
        assert (await tool.ainvoke({"url": f"{site.base_url}/echo"})).startswith("http_request is off")
