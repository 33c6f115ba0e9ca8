"""Linear deliveries through the real endpoint: comments that mention the agent, follow-ups,
agent sessions (created and prompted), and what never triggers."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import uuid

from drydock.accounts import Provider
from drydock.bus import Trigger
from drydock.channels.outbound import Outbound
from drydock.config import load_settings
from drydock.roles import Role
from drydock.threads import ids
from services.ingress.identities import learn_linear_agent, needs_linear_agent
from tests.fakes import linear as fake_linear
from tests.fakes import signing
from tests.ingress.conftest import LINEAR_SECRET, ORG, RunningIngress, StartIngress, link, trust


def new_issue() -> fake_linear.LinearIssue:
    return fake_linear.LinearIssue(str(uuid.uuid4()), "DRY-7", "Speed up the import")


def thread_of(issue: fake_linear.LinearIssue) -> str:
    return ids.linear_issue(fake_linear.ORGANIZATION, issue.id)


async def arrange(running: RunningIngress, repo: str) -> None:
    await trust(running, repo)
    await link(running, Provider.LINEAR, "user-human-1", "user-ada")


def signed(payload: dict[str, object]) -> signing.SignedRequest:
    return signing.linear(LINEAR_SECRET, payload)


class TestComments:
    async def test_a_mention_starts_a_thread_on_the_issue(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await arrange(running, repo)
            issue = new_issue()
            payload = fake_linear.comment_created(issue, f"@drydock please take this repo:{ORG}/{repo}")
            response = await running.send(signed(payload))
            assert response.status_code == 200, response.text
            (message,) = await running.inbox(thread_of(issue))
            assert message.trigger is Trigger.MENTION
            assert message.repository == f"{ORG}/{repo}"
            assert message.references["linear_issue_identifier"] == "DRY-7"
            assert message.reply_to.address["parent_comment_id"] == payload["data"]["id"]
            assert await running.wakes(Role.CODER, thread_of(issue)) == 1

    async def test_a_comment_without_mention_only_follows_up(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await arrange(running, repo)
            issue = new_issue()
            before = await running.stream_marks()
            await running.send(signed(fake_linear.comment_created(issue, "I think this is a duplicate")))
            assert await running.stream_marks() == before
            await running.send(signed(fake_linear.comment_created(issue, f"@drydock go repo:{ORG}/{repo}")))
            await running.send(signed(fake_linear.comment_created(issue, "use the new API")))
            _, follow_up = await running.inbox(thread_of(issue))
            assert follow_up.trigger is Trigger.FOLLOW_UP

    async def test_application_comments_and_the_agents_own_never_trigger(
        self, start_ingress: StartIngress, repo: str
    ) -> None:
        async with start_ingress(linear={"agent_user_id": fake_linear.AGENT_USER}) as running:
            await arrange(running, repo)
            issue = new_issue()
            before = await running.stream_marks()
            by_app = fake_linear.comment_created(issue, f"@drydock go repo:{ORG}/{repo}", bot=True)
            by_agent = fake_linear.comment_created(
                issue, f"@drydock go repo:{ORG}/{repo}", user_id=fake_linear.AGENT_USER
            )
            for payload in (by_app, by_agent):
                assert (await running.send(signed(payload))).json()["status"] == "ignored"
            assert await running.stream_marks() == before

    async def test_the_agent_is_learned_from_the_api_key_when_unset(
        self, start_ingress: StartIngress, repo: str
    ) -> None:
        # The API key's owner linked their Linear account: the agent's own comments, written
        # as that owner, would otherwise wake the coder again and again.
        async with fake_linear.FakeLinear() as linear:
            settings = load_settings(linear={"api_key": linear.state.api_key, "api_url": linear.api_url})
            outbound = Outbound.from_settings(settings)
            async with start_ingress(outbound=outbound) as running:
                await arrange(running, repo)
                await link(running, Provider.LINEAR, fake_linear.AGENT_USER, "user-ada")
                assert needs_linear_agent(running.ingress)
                await asyncio.wait_for(learn_linear_agent(running.ingress), 10)
                assert not needs_linear_agent(running.ingress)
                issue = new_issue()
                await running.send(signed(fake_linear.comment_created(issue, f"@drydock go repo:{ORG}/{repo}")))
                own = fake_linear.comment_created(issue, "👀 On it.", user_id=fake_linear.AGENT_USER)
                answer = await running.send(signed(own))
                assert answer.json() == {"status": "ignored", "reason": "the agent's own comment"}
                assert len(await running.inbox(thread_of(issue))) == 1
            await outbound.aclose()

    async def test_an_unanswering_linear_is_asked_again(self, start_ingress: StartIngress) -> None:
        with socket.socket() as bound:
            # Bound and never listening: every connection is refused.
            bound.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{bound.getsockname()[1]}/graphql"
            outbound = Outbound.from_settings(load_settings(linear={"api_key": "lin_api_x", "api_url": url}))
            async with start_ingress(outbound=outbound) as running:
                learning = asyncio.create_task(learn_linear_agent(running.ingress, retry=0.05))
                await asyncio.sleep(0.5)
                assert not learning.done()
                assert needs_linear_agent(running.ingress)
                learning.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await learning
            await outbound.aclose()

    async def test_other_event_types_are_ignored(self, start_ingress: StartIngress) -> None:
        async with start_ingress() as running:
            before = await running.stream_marks()
            response = await running.send(signed(fake_linear.issue_created(new_issue())))
            assert response.json() == {"status": "ignored", "reason": "event 'Issue' is not routed"}
            assert await running.stream_marks() == before


class TestAgentSessions:
    async def test_created_and_prompted_sessions_reach_the_issues_thread(
        self, start_ingress: StartIngress, repo: str
    ) -> None:
        async with start_ingress() as running:
            await arrange(running, repo)
            issue, session = new_issue(), str(uuid.uuid4())
            context = f"<issue identifier='DRY-7'>Speed up the import</issue> repo:{ORG}/{repo}"
            created = fake_linear.agent_session_created(issue, session, prompt_context=context)
            await running.send(signed(created))
            await running.send(signed(fake_linear.agent_session_prompted(issue, session, "also add a benchmark")))
            first, second = await running.inbox(thread_of(issue))
            assert first.trigger is second.trigger is Trigger.DIRECT
            assert first.text == context
            assert second.text == "also add a benchmark"
            assert first.reply_to.address["agent_session_id"] == session
            assert await running.wakes(Role.CODER, thread_of(issue)) == 2

    async def test_a_session_by_an_unlinked_user_is_ignored(self, start_ingress: StartIngress, repo: str) -> None:
        async with start_ingress() as running:
            await trust(running, repo)
            before = await running.stream_marks()
            created = fake_linear.agent_session_created(
                new_issue(), str(uuid.uuid4()), prompt_context=f"repo:{ORG}/{repo}"
            )
            response = await running.send(signed(created))
            assert "not linked" in str(response.json()["skipped"])
            assert await running.stream_marks() == before
