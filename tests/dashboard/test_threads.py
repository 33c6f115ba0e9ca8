"""``/api/v1/threads``: people see their own threads and those of repositories they may see
(administrators see all), filter and page through them, read one with its messages, events,
pull requests, sandbox and changed files, start one, post a follow-up and stop a run."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest

from drydock.accounts import UserProfile
from drydock.autofix.overrides import AutofixOverrides, OverrideSource
from drydock.autofix.policy import OverrideState
from drydock.bus import BusUnavailable, EventType, InboxMessage, Wake, subjects
from drydock.bus.envelopes import Channel
from drydock.bus.streams import RUNS_STREAM
from drydock.infra.server_keys import ServerKeys
from drydock.roles import Role
from drydock.sandbox.handle import SandboxHandle
from drydock.sandbox.records import SandboxStore
from drydock.threads import Inbox
from drydock.threads.fields import SANDBOX_ID, ThreadState
from drydock.threads.pr_records import PullRequestRecord, PullRequestStore
from drydock.threads.stops import StopRequests
from tests.dashboard.conftest import Site, SiteFactory
from tests.fakes.github import FakeGithub
from tests.fakes.github.history import history_of
from tests.fakes.github.state import PullRequest

PROMPT = "Fix add() in calc.py\n\nIt subtracts."


def new_id() -> str:
    return str(uuid.uuid4())


async def last_wake(site: Site, thread_id: str) -> Wake:
    raw = await site.runtime.bus.js.get_last_msg(RUNS_STREAM, subjects.run(Role.CODER, thread_id))
    assert raw.data is not None
    return Wake.model_validate_json(raw.data)


async def inbox(site: Site, thread_id: str) -> list[InboxMessage]:
    return [stored.message for stored in await Inbox(site.runtime.bus).read_after(thread_id)]


class TestCreate:
    async def test_a_thread_started_here_is_a_queued_coder_thread_with_its_message_and_wake(self, site: Site) -> None:
        await site.enable()
        ada = await site.sign_in("ada")
        answer = await ada.send(
            "POST", "/api/v1/threads", {"repository": "acme/widgets", "prompt": PROMPT, "model": "gpt-5"}
        )
        assert answer.status_code == 201, answer.text
        created = answer.json()
        thread_id = created["id"]
        assert uuid.UUID(thread_id).version == 4
        assert created | {"created_at": None, "last_activity": None} == {
            "id": thread_id, "kind": "coder", "channel": "dashboard", "repository": "acme/widgets", "owner": "dev-ada",
            "owner_login": "ada", "state": "queued", "title": "Fix add() in calc.py", "created_at": None,
            "model": "gpt-5", "effort": None, "outcome": None, "last_activity": None, "pull_request": None,
        }  # fmt: skip
        assert created["last_activity"] >= created["created_at"]
        thread = await site.metadata.get(thread_id)
        assert (thread.kind, thread.channel, thread.owner, thread.model, thread.title, thread.state) == (
            Role.CODER, Channel.DASHBOARD, "dev-ada", "gpt-5", "Fix add() in calc.py", ThreadState.QUEUED,
        )  # fmt: skip
        [message] = await inbox(site, thread_id)
        assert (message.text, message.author.user_id, message.reply_to.channel.value) == (
            PROMPT,
            "dev-ada",
            "dashboard",
        )
        assert (await last_wake(site, thread_id)).thread_id == thread_id

    async def test_the_repository_must_be_enabled_for_the_coder(self, site: Site) -> None:
        await site.enable("acme/widgets", coder=False, reviewer=True)
        ada = await site.sign_in("ada")
        for repository in ("acme/widgets", "acme/other"):
            answer = await ada.send("POST", "/api/v1/threads", {"repository": repository, "prompt": "x"})
            assert answer.status_code == 422
            assert answer.json()["detail"][0]["loc"] == ["body", "repository"]
            assert "not enabled for the coder" in answer.json()["detail"][0]["msg"]

    async def test_invalid_input_names_each_field(self, site: Site) -> None:
        await site.enable()
        ada = await site.sign_in("ada")
        answer = await ada.send(
            "POST", "/api/v1/threads", {"repository": "not a repo", "prompt": "x", "model": "gpt-9", "effort": "loud"}
        )
        assert answer.status_code == 422
        assert {error["loc"][-1] for error in answer.json()["detail"]} == {"repository", "model", "effort"}
        answer = await ada.send("POST", "/api/v1/threads", {"repository": "acme/widgets", "prompt": ""})
        assert answer.status_code == 422
        assert answer.json()["detail"][0]["loc"] == ["body", "prompt"]

    async def test_a_repository_the_person_cannot_see_is_403(self, site: Site) -> None:
        await site.enable("acme/secret")
        bob = await site.session("gh-2", "bob", repositories=("acme/widgets",))
        answer = await bob.send("POST", "/api/v1/threads", {"repository": "acme/secret", "prompt": "x"})
        assert answer.status_code == 403

    async def test_a_thread_whose_message_cannot_be_sent_is_failed_not_queued(
        self, site: Site, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async def unavailable(*args: object, **kwargs: object) -> None:
            raise BusUnavailable("publish to drydock.inbox.x not acknowledged: timeout")

        monkeypatch.setattr("services.dashboard.threads.service.hand_off", unavailable)
        await site.enable()
        ada = await site.sign_in("ada")
        answer = await ada.send("POST", "/api/v1/threads", {"repository": "acme/widgets", "prompt": "x"})
        assert answer.status_code == 503
        [thread] = (await ada.get("/api/v1/threads")).json()["threads"]
        assert thread["state"] == "failed"


class TestList:
    async def test_people_see_their_own_and_their_repositories_threads_administrators_all(self, site: Site) -> None:
        own = await site.thread(
            new_id(), owner="gh-2", repository="acme/secret", created_at="2026-01-01T00:00:01+00:00"
        )
        shared = await site.thread(new_id(), repository="acme/widgets", created_at="2026-01-01T00:00:02+00:00")
        hidden = await site.thread(new_id(), repository="acme/secret", created_at="2026-01-01T00:00:03+00:00")
        bob = await site.session("gh-2", "bob", repositories=("acme/widgets",))
        admin = await site.session("gh-1", "root", admin=True)
        assert [t["id"] for t in (await bob.get("/api/v1/threads")).json()["threads"]] == [shared, own]
        assert [t["id"] for t in (await admin.get("/api/v1/threads")).json()["threads"]] == [hidden, shared, own]

    async def test_filters(self, site: Site) -> None:
        github = await site.thread(new_id(), channel="github", created_at="2026-01-01T00:00:01+00:00")
        slack = await site.thread(new_id(), channel="slack", owner="gh-2", created_at="2026-01-01T00:00:02+00:00")
        await site.emit(github, EventType.STARTED)
        admin = await site.session("gh-1", "root", admin=True)

        async def listed(query: str) -> list[str]:
            answer = await admin.get(f"/api/v1/threads?{query}")
            assert answer.status_code == 200, answer.text
            return [thread["id"] for thread in answer.json()["threads"]]

        assert await listed("channel=slack") == [slack]
        assert await listed("state=running") == [github]
        assert await listed("owner=gh-2") == [slack]
        assert await listed("repository=acme/widgets&kind=coder") == [slack, github]
        assert await listed("repository=acme/nothing") == []

    async def test_pages(self, site: Site) -> None:
        created = [await site.thread(new_id(), created_at=f"2026-01-01T00:00:{second:02}+00:00") for second in range(5)]
        admin = await site.session("gh-1", "root", admin=True)
        first = (await admin.get("/api/v1/threads?limit=2")).json()
        second = (await admin.get(f"/api/v1/threads?limit=2&cursor={first['next_cursor']}")).json()
        third = (await admin.get(f"/api/v1/threads?limit=2&cursor={second['next_cursor']}")).json()
        listed = [t["id"] for page in (first, second, third) for t in page["threads"]]
        assert listed == created[::-1]
        assert third["next_cursor"] is None

    @pytest.mark.parametrize("query", ["state=sleeping", "cursor=bogus", "limit=0", "limit=500"])
    async def test_bad_queries_are_422(self, site: Site, query: str) -> None:
        ada = await site.sign_in("ada")
        assert (await ada.get(f"/api/v1/threads?{query}")).status_code == 422

    async def test_a_title_is_derived_for_threads_from_elsewhere(self, site: Site) -> None:
        await site.thread(new_id())
        admin = await site.session("gh-1", "root", admin=True)
        assert (await admin.get("/api/v1/threads")).json()["threads"][0]["title"] == "acme/widgets#7"


class TestDetail:
    async def test_messages_events_pull_requests_sandbox_and_changed_files(self, site: Site) -> None:
        await site.enable()
        ada = await site.sign_in("ada")
        thread_id = (
            await ada.send("POST", "/api/v1/threads", {"repository": "acme/widgets", "prompt": PROMPT})
        ).json()["id"]
        await site.emit(thread_id, EventType.STARTED, model="gpt-5.1", sandbox_id="sbx-1")
        await site.emit(
            thread_id,
            EventType.MODEL_CALL,
            tool_calls=["write_file", "edit_file", "execute"],
            arguments=[
                json.dumps({"file_path": "/workspace/widgets/calc.py", "content": "x"}),
                json.dumps({"file_path": "/workspace/widgets/test_calc.py", "old_string": "a"})[:40] + "…",
                json.dumps({"command": "pytest"}),
            ],
            text="Fixing it.",
        )
        await site.emit(thread_id, EventType.COMPLETED, summary="Fixed add().")
        await PullRequestStore(site.runtime.redis, site.runtime.keys).record(
            PullRequestRecord("github.com", "acme/widgets", 12, thread_id, "drydock/fix-add")
        )
        records = SandboxStore(site.runtime.redis, site.runtime.keys, ServerKeys.from_settings(site.settings.crypto))
        handle = SandboxHandle(
            id="sbx-1", provider="local", thread_id=thread_id, base_url="http://127.0.0.1:1",
            token=records.daemon_token("sbx-1"), workspace="/w", created_at=datetime.now(UTC), isolation="bubblewrap",
        )  # fmt: skip
        await records.put(handle)
        await site.metadata.compare_and_set(thread_id, SANDBOX_ID, expected=None, new="sbx-1")

        answer = await ada.get(f"/api/v1/threads/{thread_id}")
        assert answer.status_code == 200
        detail = answer.json()
        assert detail["state"] == "idle"
        assert [message["text"] for message in detail["messages"]] == [PROMPT]
        assert [event["type"] for event in detail["events"]] == ["started", "model_call", "completed"]
        assert [event["state"] for event in detail["events"]] == ["running", None, "idle"]
        both_off = "the owner's autofix setting and the repository's autofix opt-in are off"
        assert detail["pull_requests"] == [
            {"repository": "acme/widgets", "number": 12, "url": "https://github.com/acme/widgets/pull/12",
             "state": "open", "branch": "drydock/fix-add", "checks": None, "checks_error": None,
             "autofix": {"enabled": False, "reason": both_off}},
        ]  # fmt: skip
        assert detail["sandbox"]["status"] == "ready"
        assert detail["sandbox"]["provider"] == "local"
        assert "secret-token" not in answer.text
        assert detail["changed_files"] == ["/workspace/widgets/calc.py"]

    async def test_a_sandbox_being_created(self, site: Site) -> None:
        thread_id = await site.thread(new_id(), owner="gh-2")
        await site.metadata.compare_and_set(thread_id, SANDBOX_ID, expected=None, new='creating:{"owner": "w"}')
        bob = await site.session("gh-2", "bob")
        assert (await bob.get(f"/api/v1/threads/{thread_id}")).json()["sandbox"] == {
            "status": "creating", "id": None, "provider": None, "isolation": None, "created_at": None,
            "last_used_at": None,
        }  # fmt: skip

    async def test_unknown_and_invisible_threads(self, site: Site) -> None:
        hidden = await site.thread(new_id(), repository="acme/secret")
        bob = await site.session("gh-2", "bob", repositories=("acme/widgets",))
        assert (await bob.get(f"/api/v1/threads/{new_id()}")).status_code == 404
        assert (await bob.get("/api/v1/threads/not-a-thread")).status_code == 404
        assert (await bob.get(f"/api/v1/threads/{hidden}")).status_code == 403


class TestPullRequestChecks:
    async def test_its_state_and_each_checks_latest_run_and_a_failed_read_said_so(
        self, site_factory: SiteFactory
    ) -> None:
        async with FakeGithub() as github:
            app = github.create_app("drydock")
            github.install(app, "acme", ["widgets"])
            site = await site_factory(
                github={"api_url": github.base_url, "app_id": app.id, "private_key": app.private_key_pem}
            )
            thread_id = await site.thread(new_id(), owner="gh-2")
            records = PullRequestStore(site.runtime.redis, site.runtime.keys)
            await records.record(PullRequestRecord("github.com", "acme/widgets", 12, thread_id, "drydock/fix-add"))
            head = "c0ffee" * 6 + "c0fe"
            github.state.pulls[("acme/widgets", 12)] = PullRequest(
                id=github.state.next_id(), repository="acme/widgets", number=12, title="Fix add()", body="",
                head_ref="drydock/fix-add", head_sha=head, base_ref="main", draft=False,
                user={"login": "drydock[bot]", "id": 1, "type": "Bot"}, state="closed", merged_at=datetime.now(UTC),
            )  # fmt: skip
            history = history_of(github.state)
            history.add_check_run("acme/widgets", "tests", head, "failure")
            history.add_check_run("acme/widgets", "tests", head, "success")
            history.add_check_run("acme/widgets", "lint", head, None)
            bob = await site.session("gh-2", "bob")
            [pull] = (await bob.get(f"/api/v1/threads/{thread_id}")).json()["pull_requests"]
            assert pull["state"] == "merged"
            assert [(check["name"], check["outcome"]) for check in pull["checks"]] == [
                ("lint", "in_progress"),
                ("tests", "success"),
            ]
            page = (await bob.get(f"/threads/{thread_id}")).text
            assert '<span class="check check-success">success</span>' in page

            await records.record(PullRequestRecord("github.com", "acme/elsewhere", 3, thread_id, "drydock/x"))
            pulls = (await bob.get(f"/api/v1/threads/{thread_id}")).json()["pull_requests"]
            failed = next(pull for pull in pulls if pull["repository"] == "acme/elsewhere")
            assert failed["checks"] is None
            assert failed["checks_error"]


class TestPullRequestAutofix:
    async def test_whether_autofix_keeps_each_pull_request_green_and_what_decides_it(self, site: Site) -> None:
        await site.enable(autofix=True)
        await site.accounts.save_profile(UserProfile(user_id="gh-2", autofix=True))
        thread_id = await site.thread(new_id(), owner="gh-2")
        records = PullRequestStore(site.runtime.redis, site.runtime.keys)
        for number in (12, 13):
            await records.record(PullRequestRecord("github.com", "acme/widgets", number, thread_id, f"fix-{number}"))
        await AutofixOverrides(site.runtime.redis, site.runtime.keys).set(
            "github.com", "acme/widgets", 13, OverrideState.OFF, by="ada", source=OverrideSource.COMMENT
        )
        bob = await site.session("gh-2", "bob")

        pulls = (await bob.get(f"/api/v1/threads/{thread_id}")).json()["pull_requests"]
        assert {pull["number"]: pull["autofix"] for pull in pulls} == {
            12: {"enabled": True, "reason": "on for the owner and the repository"},
            13: {"enabled": False, "reason": "turned off for this pull request"},
        }
        page = (await bob.get(f"/threads/{thread_id}")).text
        assert "Autofix on: on for the owner and the repository." in page
        assert "Autofix off: turned off for this pull request." in page

        await site.accounts.save_profile(UserProfile(user_id="gh-2", autofix=False))
        pulls = (await bob.get(f"/api/v1/threads/{thread_id}")).json()["pull_requests"]
        assert {pull["number"]: pull["autofix"]["reason"] for pull in pulls} == {
            12: "the owner's autofix setting is off",
            13: "turned off for this pull request",
        }
        listed = (await bob.get("/api/v1/threads")).json()["threads"][0]["pull_request"]
        assert listed["autofix"] is None


class TestFollowUp:
    async def test_a_follow_up_reaches_the_inbox_and_wakes_the_coder(self, site: Site) -> None:
        thread_id = await site.thread(new_id(), owner="gh-2")
        await site.emit(thread_id, EventType.COMPLETED)
        bob = await site.session("gh-2", "bob")
        answer = await bob.send("POST", f"/api/v1/threads/{thread_id}/messages", {"text": "Also fix sub()."})
        assert answer.status_code == 202, answer.text
        assert answer.json() == {"thread_id": thread_id, "state": "queued"}
        [message] = await inbox(site, thread_id)
        assert (message.text, message.channel.value, message.author.name) == ("Also fix sub().", "dashboard", "bob")
        assert (await last_wake(site, thread_id)).thread_id == thread_id

    async def test_a_running_thread_stays_running(self, site: Site) -> None:
        thread_id = await site.thread(new_id(), owner="gh-2")
        await site.emit(thread_id, EventType.STARTED)
        bob = await site.session("gh-2", "bob")
        answer = await bob.send("POST", f"/api/v1/threads/{thread_id}/messages", {"text": "And tests."})
        assert answer.json()["state"] == "running"

    async def test_reviewer_threads_take_no_follow_ups(self, site: Site) -> None:
        thread_id = await site.thread(new_id(), kind=Role.REVIEWER)
        admin = await site.session("gh-1", "root", admin=True)
        answer = await admin.send("POST", f"/api/v1/threads/{thread_id}/messages", {"text": "hi"})
        assert answer.status_code == 409

    async def test_others_threads_are_403_and_empty_text_422(self, site: Site) -> None:
        thread_id = await site.thread(new_id(), repository="acme/secret")
        bob = await site.session("gh-2", "bob")
        assert (await bob.send("POST", f"/api/v1/threads/{thread_id}/messages", {"text": "hi"})).status_code == 403
        assert (await bob.send("POST", f"/api/v1/threads/{thread_id}/messages", {"text": ""})).status_code == 422
        assert await inbox(site, thread_id) == []


class TestStop:
    async def test_stopping_a_running_thread_asks_its_worker(self, site: Site) -> None:
        thread_id = await site.thread(new_id(), owner="gh-2")
        await site.emit(thread_id, EventType.STARTED)
        bob = await site.session("gh-2", "bob")
        answer = await bob.send("POST", f"/api/v1/threads/{thread_id}/stop")
        assert answer.status_code == 202
        assert (await bob.get(f"/api/v1/threads/{thread_id}")).json()["stop_requested"] is True
        assert await StopRequests(site.runtime.redis, site.runtime.keys).take(thread_id) == "bob"

    async def test_a_thread_without_a_run_is_409(self, site: Site) -> None:
        thread_id = await site.thread(new_id(), owner="gh-2")
        bob = await site.session("gh-2", "bob")
        assert (await bob.send("POST", f"/api/v1/threads/{thread_id}/stop")).status_code == 409
        await site.emit(thread_id, EventType.COMPLETED)
        assert (await bob.send("POST", f"/api/v1/threads/{thread_id}/stop")).status_code == 409

    async def test_others_may_not_stop_it(self, site: Site) -> None:
        thread_id = await site.thread(new_id(), repository="acme/secret")
        await site.emit(thread_id, EventType.STARTED)
        bob = await site.session("gh-2", "bob")
        assert (await bob.send("POST", f"/api/v1/threads/{thread_id}/stop")).status_code == 403
        assert (await bob.client.post(f"/api/v1/threads/{thread_id}/stop")).status_code == 403
        assert await StopRequests(site.runtime.redis, site.runtime.keys).pending(thread_id) is False
