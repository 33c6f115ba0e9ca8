"""The fake GitHub's App webhook: deliveries signed and recorded with the receiver's answer,
listed newest first by cursor, read one by one, and redelivered in the background with the
same guid and body, all to the App by its JWT only."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request, Response

from drydock.channels.errors import VerificationFailed
from drydock.channels.github.verify import verify
from drydock.embedded import free_port
from drydock.github.app_jwt import app_jwt
from tests.fakes import signing
from tests.fakes.github import FakeGithub, webhooks
from tests.fakes.github.state import App, HookDelivery, Installation
from tests.fakes.loopback import LoopbackServer
from tests.waiting import eventually

SECRET = "it's a secret to everybody"


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes
    signed: bool


class Receiver(LoopbackServer):
    """A webhook endpoint that checks GitHub's signature and answers the statuses queued in
    ``answers`` (then 200); while ``open`` is clear it holds each request unanswered."""

    def __init__(self, secret: str) -> None:
        self.answers: list[int] = []
        self.received: list[Received] = []
        self.open = asyncio.Event()
        self.open.set()
        app = FastAPI()

        @app.post("/hooks")
        async def receive(request: Request) -> Response:
            body = await request.body()
            try:
                verify(secret.encode(), body, request.headers.get("x-hub-signature-256"))
            except VerificationFailed:
                signed = False
            else:
                signed = True
            self.received.append(Received(dict(request.headers), body, signed))
            await self.open.wait()
            if not signed:
                return Response("bad signature", status_code=401)
            return Response("ok", status_code=self.answers.pop(0) if self.answers else 200)

        super().__init__(app)

    @property
    def url(self) -> str:
        return f"{self.base_url}/hooks"


@pytest.fixture
async def github() -> AsyncIterator[FakeGithub]:
    async with FakeGithub() as fake:
        yield fake


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with Receiver(SECRET) as server:
        yield server
        server.open.set()


@pytest.fixture
def app(github: FakeGithub, receiver: Receiver) -> App:
    app = github.create_app("drydock")
    github.configure_webhook(app, receiver.url, SECRET)
    return app


@pytest.fixture
def installation(github: FakeGithub, app: App) -> Installation:
    return github.install(app, "acme", ["widgets"])


@pytest.fixture
async def client(github: FakeGithub) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=github.base_url) as found:
        yield found


def as_app(app: App) -> dict[str, str]:
    return {"Authorization": f"Bearer {app_jwt(app.id, app.private_key)}"}


def comment(installation: Installation, body: str = "héllo ✓") -> dict[str, Any]:
    return webhooks.issue_comment("acme", "widgets", 7, body, installation_id=installation.id)


class TestDelivery:
    async def test_a_delivery_is_signed_as_github_signs_and_recorded_with_the_answer(
        self, github: FakeGithub, receiver: Receiver, app: App, installation: Installation
    ) -> None:
        receiver.answers = [503]
        payload = comment(installation)

        failed = await github.deliver_webhook(app, "issue_comment", payload)
        succeeded = await github.deliver_webhook(app, "issue_comment", payload)

        assert (failed.status_code, failed.status) == (503, "Invalid HTTP Response: 503")
        assert (succeeded.status_code, succeeded.status) == (200, "OK")
        assert succeeded.id > failed.id
        assert succeeded.guid != failed.guid
        assert (failed.event, failed.action, failed.redelivery) == ("issue_comment", "created", False)
        assert failed.installation_id == installation.id
        assert failed.repository_id == payload["repository"]["id"]
        assert failed.duration >= 0
        assert failed.delivered_at.utcoffset() is not None
        assert "X-Hub-Signature-256" not in failed.headers
        assert github.webhook_deliveries() == [failed, succeeded]
        assert github.webhook_deliveries(failed.guid) == [failed]
        first = receiver.received[0]
        assert first.signed
        assert first.body == failed.body == signing.github(SECRET, "issue_comment", payload).body
        assert first.headers["x-github-delivery"] == failed.guid
        assert first.headers["x-github-event"] == "issue_comment"
        assert first.headers["x-github-hook-id"] == str(app.hook_id)
        assert first.headers["x-github-hook-installation-target-type"] == "integration"
        assert first.headers["x-github-hook-installation-target-id"] == str(app.id)
        assert first.headers["x-hub-signature"].startswith("sha1=")
        assert first.headers["content-type"] == "application/json"
        assert first.headers["user-agent"].startswith("GitHub-Hookshot/")

    async def test_the_installation_given_wins_over_the_payloads(
        self, github: FakeGithub, app: App, installation: Installation
    ) -> None:
        delivery = await github.deliver_webhook(app, "ping", webhooks.ping(), installation_id=installation.id)
        assert (delivery.installation_id, delivery.repository_id, delivery.action) == (installation.id, None, None)

    async def test_a_receiver_not_listening_is_status_code_0(self, github: FakeGithub, app: App) -> None:
        github.configure_webhook(app, f"http://127.0.0.1:{free_port()}/hooks", SECRET)
        delivery = await github.deliver_webhook(app, "ping", webhooks.ping())
        assert (delivery.status_code, delivery.status) == (0, "failed to connect to host")
        assert delivery.response_body is None

    @pytest.mark.parametrize("url", ["http://127.0.0.1:8080hooks", "/hooks", "ftp://example.com/hooks"])
    def test_a_webhook_url_github_would_refuse_is_refused(self, github: FakeGithub, app: App, url: str) -> None:
        with pytest.raises((httpx.InvalidURL, ValueError)):
            github.configure_webhook(app, url, SECRET)

    async def test_a_receiver_slower_than_the_deadline_is_timed_out(self, receiver: Receiver) -> None:
        receiver.open.clear()
        async with FakeGithub(webhook_timeout=0.2) as github:
            app = github.create_app()
            github.configure_webhook(app, receiver.url, SECRET)
            delivery = await github.deliver_webhook(app, "ping", webhooks.ping())
        assert (delivery.status_code, delivery.status) == (0, "timed out")


class TestListing:
    async def test_deliveries_are_listed_newest_first_a_page_per_cursor(
        self, github: FakeGithub, client: httpx.AsyncClient, app: App, installation: Installation
    ) -> None:
        sent = [await github.deliver_webhook(app, "issue_comment", comment(installation)) for _ in range(3)]
        other = github.create_app("other")
        github.configure_webhook(other, str(app.webhook_url), SECRET)
        await github.deliver_webhook(other, "ping", webhooks.ping())

        pages: list[list[dict[str, Any]]] = []
        url: str | None = "/app/hook/deliveries?per_page=1"
        while url is not None and len(pages) <= len(sent):
            response = await client.get(url, headers=as_app(app))
            assert response.status_code == 200
            pages.append(response.json())
            url = response.links.get("next", {}).get("url")
            if url is not None:
                assert "cursor=v1_" in url
                assert "per_page=1" in url

        assert [[item["id"] for item in page] for page in pages] == [[delivery.id] for delivery in reversed(sent)]
        newest = pages[0][0]
        assert newest == {
            "id": sent[-1].id,
            "guid": sent[-1].guid,
            "delivered_at": sent[-1].delivered_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "redelivery": False,
            "duration": sent[-1].duration,
            "status": "OK",
            "status_code": 200,
            "event": "issue_comment",
            "action": "created",
            "installation_id": installation.id,
            "repository_id": sent[-1].repository_id,
            "throttled_at": None,
        }

    async def test_one_page_holds_them_all_by_default(
        self, github: FakeGithub, client: httpx.AsyncClient, app: App
    ) -> None:
        sent = [await github.deliver_webhook(app, "ping", webhooks.ping()) for _ in range(3)]
        response = await client.get("/app/hook/deliveries", headers=as_app(app))
        assert [item["id"] for item in response.json()] == [delivery.id for delivery in reversed(sent)]
        assert "link" not in response.headers

    @pytest.mark.parametrize("cursor", ["12", "v1_", "v1_abc", "v2_12"])
    async def test_a_malformed_cursor_is_400(self, client: httpx.AsyncClient, app: App, cursor: str) -> None:
        response = await client.get("/app/hook/deliveries", params={"cursor": cursor}, headers=as_app(app))
        assert response.status_code == 400
        assert response.json()["status"] == "400"
        assert response.json()["documentation_url"].startswith("https://docs.github.com/")

    async def test_without_the_apps_jwt_is_401(self, client: httpx.AsyncClient, app: App) -> None:
        response = await client.get("/app/hook/deliveries")
        assert response.status_code == 401
        assert response.json()["message"] == "Requires authentication"


class TestOneDelivery:
    async def test_a_delivery_shows_its_request_and_response(
        self, github: FakeGithub, client: httpx.AsyncClient, receiver: Receiver, app: App, installation: Installation
    ) -> None:
        payload = comment(installation)
        delivery = await github.deliver_webhook(app, "issue_comment", payload)
        response = await client.get(f"/app/hook/deliveries/{delivery.id}", headers=as_app(app))
        assert response.status_code == 200
        found = response.json()
        assert (found["id"], found["guid"], found["status_code"]) == (delivery.id, delivery.guid, 200)
        assert found["url"] == receiver.url
        assert found["request"]["payload"] == payload
        assert found["request"]["headers"]["X-GitHub-Delivery"] == delivery.guid
        assert found["response"]["payload"] == "ok"
        assert found["response"]["headers"]["content-length"] == "2"


class TestRedelivery:
    async def redeliver(self, client: httpx.AsyncClient, app: App, delivery: HookDelivery) -> httpx.Response:
        return await client.post(f"/app/hook/deliveries/{delivery.id}/attempts", headers=as_app(app))

    async def test_a_redelivery_is_sent_later_with_the_same_guid_and_body(
        self, github: FakeGithub, client: httpx.AsyncClient, receiver: Receiver, app: App, installation: Installation
    ) -> None:
        receiver.answers = [503]
        failed = await github.deliver_webhook(app, "issue_comment", comment(installation))

        response = await self.redeliver(client, app, failed)
        assert response.status_code == 202
        assert response.json() == {}
        await github.redeliveries_settled()

        original, again = github.webhook_deliveries(failed.guid)
        assert original == failed
        assert (again.redelivery, again.status_code, again.status) == (True, 200, "OK")
        assert again.id > failed.id
        assert (again.event, again.action, again.installation_id) == ("issue_comment", "created", installation.id)
        assert again.body == failed.body
        first, second = receiver.received
        assert second.signed
        assert second.body == first.body
        assert second.headers["x-github-delivery"] == first.headers["x-github-delivery"] == failed.guid
        assert second.headers["x-hub-signature"] == first.headers["x-hub-signature"]
        listed = (await client.get("/app/hook/deliveries", headers=as_app(app))).json()
        assert [(item["id"], item["redelivery"]) for item in listed] == [(again.id, True), (failed.id, False)]

    async def test_a_redelivery_is_signed_with_the_current_secret(
        self, github: FakeGithub, client: httpx.AsyncClient, receiver: Receiver, app: App
    ) -> None:
        github.configure_webhook(app, receiver.url, "the old one")
        refused = await github.deliver_webhook(app, "ping", webhooks.ping())
        assert refused.status_code == 401
        github.configure_webhook(app, receiver.url, SECRET)

        assert (await self.redeliver(client, app, refused)).status_code == 202
        await github.redeliveries_settled()

        assert [delivery.status_code for delivery in github.webhook_deliveries(refused.guid)] == [401, 200]
        assert [received.signed for received in receiver.received] == [False, True]

    async def test_without_the_apps_jwt_is_401(self, github: FakeGithub, client: httpx.AsyncClient, app: App) -> None:
        delivery = await github.deliver_webhook(app, "ping", webhooks.ping())
        response = await client.post(f"/app/hook/deliveries/{delivery.id}/attempts")
        assert response.status_code == 401
        await github.redeliveries_settled()
        assert github.webhook_deliveries() == [delivery]

    async def test_a_redelivery_under_way_is_cancelled_when_the_fake_stops(self, receiver: Receiver) -> None:
        async with FakeGithub() as github, httpx.AsyncClient(base_url=github.base_url) as client:
            app = github.create_app()
            github.configure_webhook(app, receiver.url, SECRET)
            delivery = await github.deliver_webhook(app, "ping", webhooks.ping())
            receiver.open.clear()
            assert (await self.redeliver(client, app, delivery)).status_code == 202
            (task,) = github.state.redeliveries
            await eventually(lambda: len(receiver.received) == 2, within=10, what="the redelivery reached the receiver")
        assert task.cancelled()
        assert not github.state.redeliveries
        assert github.webhook_deliveries() == [delivery]


@pytest.mark.parametrize(("method", "suffix"), [("GET", ""), ("POST", "/attempts")])
async def test_an_unknown_or_another_apps_delivery_is_404(
    github: FakeGithub, client: httpx.AsyncClient, app: App, method: str, suffix: str
) -> None:
    other = github.create_app("other")
    github.configure_webhook(other, str(app.webhook_url), SECRET)
    theirs = await github.deliver_webhook(other, "ping", webhooks.ping())
    for delivery_id in (theirs.id, 999_999, "nope"):
        response = await client.request(method, f"/app/hook/deliveries/{delivery_id}{suffix}", headers=as_app(app))
        assert response.status_code == 404
        assert response.json()["message"] == "Not Found"
    await github.redeliveries_settled()
    assert github.webhook_deliveries() == [theirs]
