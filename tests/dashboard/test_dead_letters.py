"""``/api/v1/dead-letters``: administrators see the wakes that used up their deliveries and
retry one, which wakes the thread again on the real bus."""

from __future__ import annotations

import uuid

from drydock.bus import Wake, subjects
from drydock.bus.streams import RUNS_STREAM
from drydock.roles import Role
from drydock.worker.dead_letters import DeadLetter, DeadLetters
from tests.dashboard.conftest import Site


async def bury(site: Site) -> DeadLetter:
    letter = DeadLetter(
        id=f"coder-{uuid.uuid4().int % 10**9}",
        thread_id=str(uuid.uuid4()),
        role="coder",
        deliveries=5,
        error="RuntimeError: sandbox exploded",
        buried_at="2026-12-04T11:00:00+00:00",
    )
    await DeadLetters(site.runtime.redis, site.runtime.keys).record(letter)
    return letter


class TestDeadLetters:
    async def test_an_administrator_lists_them(self, site: Site) -> None:
        letter = await bury(site)
        admin = await site.sign_in("root", admin=True)

        answer = await admin.get("/api/v1/dead-letters")

        assert answer.status_code == 200, answer.text
        assert [item["id"] for item in answer.json()] == [letter.id]
        assert answer.json()[0]["error"] == "RuntimeError: sandbox exploded"

    async def test_others_may_neither_list_nor_retry(self, site: Site) -> None:
        letter = await bury(site)
        ada = await site.sign_in("ada")

        assert (await ada.get("/api/v1/dead-letters")).status_code == 403
        assert (await ada.send("POST", f"/api/v1/dead-letters/{letter.id}/retry")).status_code == 403
        assert len(await DeadLetters(site.runtime.redis, site.runtime.keys).all()) == 1

    async def test_a_retry_wakes_the_thread_and_removes_the_record(self, site: Site) -> None:
        letter = await bury(site)
        admin = await site.sign_in("root", admin=True)

        answer = await admin.send("POST", f"/api/v1/dead-letters/{letter.id}/retry")

        assert answer.status_code == 200, answer.text
        stored = await site.runtime.bus.js.get_msg(RUNS_STREAM, subject=subjects.run(Role.CODER, letter.thread_id))
        wake = Wake.model_validate_json(stored.data or b"")
        assert (wake.thread_id, wake.reason) == (letter.thread_id, "retry")
        assert (await admin.get("/api/v1/dead-letters")).json() == []

    async def test_an_unknown_or_malformed_id_is_a_4xx(self, site: Site) -> None:
        admin = await site.sign_in("root", admin=True)

        assert (await admin.send("POST", "/api/v1/dead-letters/coder-404/retry")).status_code == 404
        assert (await admin.send("POST", "/api/v1/dead-letters/NOT VALID/retry")).status_code == 422


class TestPage:
    async def test_an_administrator_sees_them_and_retries_one_from_the_page(self, site: Site) -> None:
        letter = await bury(site)
        admin = await site.sign_in("root", admin=True)

        page = await admin.get("/dead-letters")
        assert page.status_code == 200, page.text
        assert letter.thread_id in page.text
        assert "RuntimeError: sandbox exploded" in page.text
        answer = await admin.form(f"/dead-letters/{letter.id}/retry", {})

        assert answer.status_code == 303, answer.text
        assert await DeadLetters(site.runtime.redis, site.runtime.keys).all() == []
        assert "No dead letters." in (await admin.get("/dead-letters")).text

    async def test_it_is_403_for_others(self, site: Site) -> None:
        ada = await site.sign_in("ada")

        assert (await ada.get("/dead-letters")).status_code == 403
