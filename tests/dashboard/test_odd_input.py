"""Requests no well-behaved client sends, each answered with the right 4xx (or a stream that
starts where it can) instead of a 500 or a 503 that reads like an outage."""

from __future__ import annotations

import base64
import uuid

import pytest

from drydock.bus import EventType
from services.dashboard.threads.sse import LAST_SEQUENCE, start_after
from tests.dashboard.conftest import REPOSITORY_NAME, Site, SiteFactory
from tests.dashboard.test_event_stream import events, served, viewer

__all__ = ["served"]


class TestBodies:
    @pytest.mark.parametrize(
        ("body", "content_type"),
        [
            (b"\xff\xfe", "text/plain"),
            (b"\xff\xfe", "application/json"),
            (b'{"repository": "acme/widgets", "prompt": "\\ud800"}', "application/json"),
        ],
    )
    async def test_a_body_that_cannot_be_echoed_is_a_422(self, site: Site, body: bytes, content_type: str) -> None:
        await site.enable()
        ada = await site.sign_in("ada")
        answer = await ada.client.post(
            "/api/v1/threads", content=body, headers={"X-CSRF-Token": ada.csrf, "content-type": content_type}
        )
        assert answer.status_code == 422, answer.text
        assert {"loc", "msg", "type"} == set(answer.json()["detail"][0])

    async def test_a_blank_prompt_is_a_422_not_a_thread(self, site: Site) -> None:
        await site.enable()
        ada = await site.sign_in("ada")
        answer = await ada.send("POST", "/api/v1/threads", {"repository": REPOSITORY_NAME, "prompt": " \n\t "})
        assert answer.status_code == 422
        assert answer.json()["detail"][0]["loc"] == ["body", "prompt"]
        page = await ada.form("/threads/new", {"repository": REPOSITORY_NAME, "prompt": "   "})
        assert page.status_code == 422
        assert "it is blank" in page.text
        assert (await ada.get("/api/v1/threads")).json()["threads"] == []

    async def test_a_blank_follow_up_is_a_422(self, site: Site) -> None:
        thread_id = await site.thread(str(uuid.uuid4()), owner="gh-2")
        bob = await site.session("gh-2", "bob")
        answer = await bob.send("POST", f"/api/v1/threads/{thread_id}/messages", {"text": "  "})
        assert answer.status_code == 422


class TestListCursor:
    @pytest.mark.parametrize("score", ["nan", "1_000", "1 ", "١٢", "1e3", ""])
    async def test_a_cursor_the_list_did_not_hand_out_is_a_422(self, site: Site, score: str) -> None:
        ada = await site.sign_in("ada", admin=True)
        cursor = base64.urlsafe_b64encode(f"{score}:{uuid.uuid4()}".encode()).decode().rstrip("=")
        answer = await ada.get("/api/v1/threads", params={"cursor": cursor})
        assert answer.status_code == 422, answer.text
        assert (await ada.get("/threads", params={"cursor": cursor})).status_code == 422


class TestStreamStart:
    @pytest.mark.parametrize(
        ("after", "last_event_id", "start"),
        [
            (0, "7", 7),
            (5, None, 5),
            (5, "²", 5),
            (5, "9" * 4400, 5),
            (5, str(2**64), 5),
            (5, "-3", 5),
            (-2, None, 0),
            (2**70, None, LAST_SEQUENCE),
        ],
    )
    def test_where_a_stream_starts(self, after: int, last_event_id: str | None, start: int) -> None:
        assert start_after(after, last_event_id) == start

    @pytest.mark.parametrize("url", ["/api/v1/threads/{}/events/stream", "/threads/{}/live"])
    @pytest.mark.parametrize("last_event_id", ["\xb2", "9" * 4400, str(2**64 - 1)])
    async def test_an_odd_last_event_id_streams_from_the_start(
        self, site: Site, served: str, url: str, last_event_id: str
    ) -> None:
        bob, thread_id = await viewer(site, served)
        await site.emit(thread_id, EventType.STARTED, model="gpt-5.1")
        header = [(b"last-event-id", last_event_id.encode("latin-1"))]
        [started] = await events(bob, url.format(thread_id), 1, header)
        assert started["data"]["type"] == "started"

    async def test_a_start_beyond_any_sequence_is_a_422(self, site: Site) -> None:
        thread_id = await site.thread(str(uuid.uuid4()), owner="gh-2")
        bob = await site.session("gh-2", "bob")
        answer = await bob.get(f"/api/v1/threads/{thread_id}/events/stream", params={"after": 2**64 - 1})
        assert answer.status_code == 422


class TestStaticFiles:
    @pytest.mark.parametrize("name", ["a" * 300 + ".css", "..%2Fthread.css", ".hidden.css", "dashboard.py"])
    async def test_an_unknown_name_is_a_404(self, site: Site, name: str) -> None:
        assert (await site.client().get(f"/static/{name}")).status_code == 404

    async def test_a_file_of_the_package_is_served(self, site: Site) -> None:
        answer = await site.client().get("/static/dashboard.css")
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "text/css; charset=utf-8"


class TestDevelopmentLoginAdministrators:
    async def test_a_listed_login_is_an_administrator_unticked(self, site_factory: SiteFactory) -> None:
        site = await site_factory(dashboard={"admin_logins": ["Ada"]})
        ada = await site.sign_in("ada")
        assert (await ada.get("/api/v1/me")).json()["admin"] is True
        bob = await site.sign_in("bob")
        assert (await bob.get("/api/v1/me")).json()["admin"] is False
