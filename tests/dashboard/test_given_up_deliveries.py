"""``/api/v1/dead-letters/deliveries`` and the dead-letters page: administrators see the GitHub
webhook deliveries the redelivery sweep gave up on and ask GitHub, here the GitHub double, to
send one again."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import cast

import pytest

from drydock.channels.github.given_up import GivenUpDeliveries, GivenUpDelivery
from drydock.embedded import free_port
from drydock.github.hook_deliveries import HookDelivery
from tests.dashboard.conftest import Site, SiteFactory
from tests.fakes.github import FakeGithub
from tests.fakes.github import webhooks as payloads
from tests.fakes.github.hook_deliveries import delivery_json


@dataclass
class GaveUp:
    site: Site
    github: FakeGithub
    delivery: GivenUpDelivery

    @property
    def records(self) -> GivenUpDeliveries:
        return GivenUpDeliveries(self.site.runtime.redis, self.site.runtime.keys)


async def give_up(site: Site, github: FakeGithub) -> GivenUpDelivery:
    """A delivery to an address nobody answers (GitHub records status 0), given up by the sweep."""
    app = next(iter(github.state.apps.values()))
    attempt = await github.deliver_webhook(
        app, "issue_comment", payloads.issue_comment("acme", "widgets", 7, "@drydock please fix")
    )
    records = GivenUpDeliveries(site.runtime.redis, site.runtime.keys)
    await records.record(
        HookDelivery.of(delivery_json(attempt)), 8, at=datetime.now(UTC), payload=json.loads(attempt.body)
    )
    [record] = await records.all()
    return record


@pytest.fixture
async def gave_up(site_factory: SiteFactory, github: FakeGithub) -> GaveUp:
    app = github.create_app("drydock")
    github.install(app, "acme", ["widgets"])
    github.configure_webhook(app, f"http://127.0.0.1:{free_port()}/webhooks/github", "webhook-secret")
    site = await site_factory(github={"api_url": github.base_url, "app_id": app.id, "private_key": app.private_key_pem})
    return GaveUp(site, github, await give_up(site, github))


class TestApi:
    async def test_an_administrator_lists_them(self, gave_up: GaveUp) -> None:
        admin = await gave_up.site.sign_in("root", admin=True)

        answer = await admin.get("/api/v1/dead-letters/deliveries")

        assert answer.status_code == 200, answer.text
        [listed] = answer.json()
        assert (listed["guid"], listed["event"], listed["action"], listed["status_code"], listed["redeliveries"]) == (
            gave_up.delivery.guid, "issue_comment", "created", 0, 8,
        )  # fmt: skip
        assert listed["repository"] == "acme/widgets"
        assert listed["url"].startswith("https://github.com/acme/widgets/issues/7#issuecomment-")

    async def test_asking_again_has_github_send_it_and_removes_the_record(self, gave_up: GaveUp) -> None:
        admin = await gave_up.site.sign_in("root", admin=True)
        guid = gave_up.delivery.guid

        answer = await admin.send("POST", f"/api/v1/dead-letters/deliveries/{guid}/redeliver")
        await gave_up.github.redeliveries_settled()

        assert answer.status_code == 202, answer.text
        assert answer.json()["guid"] == guid
        assert [attempt.redelivery for attempt in gave_up.github.webhook_deliveries(guid)] == [False, True]
        assert (await admin.get("/api/v1/dead-letters/deliveries")).json() == []
        # The sweep's attempts renewed: none made since this ask.
        asked = cast(str | None, await gave_up.site.runtime.redis.get(gave_up.site.runtime.keys.redelivery(guid)))
        assert asked is not None
        assert asked.split(" ")[0] == "0"

    async def test_others_may_neither_list_nor_ask(self, gave_up: GaveUp) -> None:
        ada = await gave_up.site.sign_in("ada")
        guid = gave_up.delivery.guid

        assert (await ada.get("/api/v1/dead-letters/deliveries")).status_code == 403
        assert (await ada.send("POST", f"/api/v1/dead-letters/deliveries/{guid}/redeliver")).status_code == 403
        assert gave_up.github.webhook_deliveries(guid)[-1].redelivery is False
        assert len(await gave_up.records.all()) == 1

    async def test_an_unknown_or_malformed_guid_is_a_4xx(self, gave_up: GaveUp) -> None:
        admin = await gave_up.site.sign_in("root", admin=True)

        unknown = await admin.send("POST", "/api/v1/dead-letters/deliveries/0b0e-404/redeliver")
        assert unknown.status_code == 404
        assert "no given-up GitHub delivery 0b0e-404" in unknown.text
        assert (await admin.send("POST", "/api/v1/dead-letters/deliveries/NOT%20VALID/redeliver")).status_code == 422

    async def test_a_delivery_github_no_longer_keeps_is_404_and_dropped(self, gave_up: GaveUp) -> None:
        admin = await gave_up.site.sign_in("root", admin=True)
        forgotten = replace(gave_up.delivery, guid="forgotten-by-github", id=987654321)
        await gave_up.site.runtime.redis.hset(
            gave_up.site.runtime.keys.deliveries_given_up(), forgotten.guid, forgotten.to_json()
        )

        answer = await admin.send("POST", f"/api/v1/dead-letters/deliveries/{forgotten.guid}/redeliver")

        assert answer.status_code == 404, answer.text
        assert "GitHub no longer keeps delivery forgotten-by-github" in answer.text
        assert [record.guid for record in await gave_up.records.all()] == [gave_up.delivery.guid]

    async def test_without_a_github_app_asking_is_a_409_that_names_the_settings(
        self, site: Site, github: FakeGithub
    ) -> None:
        record = GivenUpDelivery(
            guid="a-guid", id=1, event="issue_comment", action="created", repository_id=None, status_code=503,
            delivered_at=datetime.now(UTC).isoformat(), redeliveries=8, given_up_at=datetime.now(UTC).isoformat(),
        )  # fmt: skip
        await site.runtime.redis.hset(site.runtime.keys.deliveries_given_up(), record.guid, record.to_json())
        admin = await site.sign_in("root", admin=True)

        answer = await admin.send("POST", "/api/v1/dead-letters/deliveries/a-guid/redeliver")

        assert answer.status_code == 409, answer.text
        assert "DRYDOCK_GITHUB_APP_ID" in answer.text
        assert len(await GivenUpDeliveries(site.runtime.redis, site.runtime.keys).all()) == 1


class TestPage:
    async def test_an_administrator_sees_them_and_asks_for_one_again_from_the_page(self, gave_up: GaveUp) -> None:
        admin = await gave_up.site.sign_in("root", admin=True)
        guid = gave_up.delivery.guid

        page = await admin.get("/dead-letters")
        assert page.status_code == 200, page.text
        assert guid in page.text
        assert "issue_comment.created" in page.text
        assert f'<a href="{gave_up.delivery.url}" rel="noopener noreferrer">acme/widgets</a>' in page.text
        assert "no answer" in page.text
        answer = await admin.form(f"/dead-letters/deliveries/{guid}/redeliver", {})
        await gave_up.github.redeliveries_settled()

        assert answer.status_code == 303, answer.text
        assert [attempt.redelivery for attempt in gave_up.github.webhook_deliveries(guid)] == [False, True]
        assert "No GitHub delivery given up." in (await admin.get("/dead-letters")).text
