"""A mention GitHub recorded as failed is not lost: the fake GitHub sends the App's webhook to
the real ingress, which answers 503 while the inbox stream is missing; once it is back, the
active autofix controller asks GitHub for the delivery again and the agent answers it. One that
failed every time the controller asked is listed on the dashboard, where an administrator has
GitHub send it again."""

from __future__ import annotations

import contextlib
from pathlib import Path

from drydock.bus import provision, topology
from drydock.bus.streams import INBOX_STREAM
from drydock.threads import ids
from tests.e2e.dashboard import dev_sign_in
from tests.e2e.pipeline import GITHUB_SECRET, ORG, Stage, pipeline
from tests.e2e.test_github_issue import completed, mention
from tests.fakes.openai_server import Script
from tests.waiting import eventually


def point_the_webhook_at_the_ingress(stage: Stage) -> None:
    stage.github.configure_webhook(
        stage.app, f"{str(stage.ingress.base_url).rstrip('/')}/webhooks/github", GITHUB_SECRET
    )


async def test_a_mention_answered_503_is_redelivered_once_the_ingress_can_take_it(tmp_path: Path) -> None:
    script = Script().reply("Looked into it.")
    async with pipeline(tmp_path, script, autofix_controller=True, github={"redeliver_interval": 0.2}) as stage:
        point_the_webhook_at_the_ingress(stage)
        thread_id = ids.github_issue("github.com", ORG, "widgets", 7)
        js = stage.runtime.bus.js
        await js.delete_stream(INBOX_STREAM)

        first = await stage.github.deliver_webhook(stage.app, "issue_comment", mention(stage, "@drydock please look"))

        assert first.status_code == 503
        await provision(js, topology(stage.settings.nats))

        def redelivered() -> bool:
            return any(
                attempt.redelivery and attempt.status_code == 200
                for attempt in stage.github.webhook_deliveries(first.guid)
            )

        await eventually(redelivered, within=30, what="GitHub redelivered the mention and the ingress took it")
        await eventually(lambda: completed(stage, thread_id), within=60, what="the redelivered mention's run completed")
        assert len(stage.model.requests) == 1


async def test_a_mention_given_up_is_sent_again_from_the_dashboard_and_answered(tmp_path: Path) -> None:
    script = Script().reply("Looked into it.")
    github = {"redeliver_interval": 0.2, "redeliver_attempts": 1}
    async with pipeline(tmp_path, script, autofix_controller=True, dashboard=True, github=github) as stage:
        assert stage.dashboard_url is not None
        point_the_webhook_at_the_ingress(stage)
        thread_id = ids.github_issue("github.com", ORG, "widgets", 7)
        js = stage.runtime.bus.js
        await js.delete_stream(INBOX_STREAM)
        first = await stage.github.deliver_webhook(stage.app, "issue_comment", mention(stage, "@drydock please look"))
        admin, csrf = await dev_sign_in(stage.dashboard_url, "root", admin=True)
        async with contextlib.aclosing(admin):

            async def listed() -> bool:
                answer = await admin.get("/api/v1/dead-letters/deliveries")
                return [item["guid"] for item in answer.json()] == [first.guid]

            await eventually(listed, within=30, what="the delivery given up and listed on the dashboard")
            assert [attempt.status_code for attempt in stage.github.webhook_deliveries(first.guid)] == [503, 503]
            await provision(js, topology(stage.settings.nats))

            answer = await admin.post(
                f"/api/v1/dead-letters/deliveries/{first.guid}/redeliver", headers={"X-CSRF-Token": csrf}
            )

            assert answer.status_code == 202, answer.text
            await eventually(lambda: completed(stage, thread_id), within=60, what="the mention sent again was answered")
            assert (await admin.get("/api/v1/dead-letters/deliveries")).json() == []
        assert len(stage.model.requests) == 1
