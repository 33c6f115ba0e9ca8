"""Scenarios 4 and 5: a Slack mention naming a repository is answered in its Slack thread with
the assistant status set and cleared; a Linear mention gets agent activities and a reply."""

from __future__ import annotations

from pathlib import Path

from drydock.accounts import Provider
from drydock.bus import EventType
from drydock.threads import ids
from tests.e2e.pipeline import REPOSITORY, Stage, pipeline
from tests.fakes import linear as fake_linear
from tests.fakes import slack as fake_slack
from tests.fakes.openai_server import Script
from tests.waiting import eventually

CHANNEL = "C0WIDGETS"


async def completed(stage: Stage, thread_id: str) -> bool:
    return any(event.type is EventType.COMPLETED for event in await stage.events(thread_id))


class TestSlack:
    async def test_a_mention_with_a_repository_is_answered_in_the_thread_with_status_set_and_cleared(
        self, tmp_path: Path
    ) -> None:
        script = (
            Script()
            .tool_call("execute", command="cd widgets && grep -n 'def add' calc.py")
            .tool_call("slack_reply", text="`add()` is defined in calc.py, line 1.")
            .reply("Answered in Slack.")
        )
        async with pipeline(tmp_path, script) as stage:
            await stage.accounts.link(Provider.SLACK, "U0HUMAN", "user-ada")
            text = f"<@{fake_slack.BOT_USER}> where is add() defined? repo:{REPOSITORY}"
            ts = stage.slack.state.add_message(CHANNEL, text)
            response = await stage.deliver_slack(fake_slack.app_mention(CHANNEL, ts, text))
            assert response.status_code == 200, response.text
            thread_id = ids.slack_thread(fake_slack.TEAM, CHANNEL, ts)

            await eventually(lambda: completed(stage, thread_id), within=60, what="the run to complete")

            replies = [m.text for m in stage.slack.state.replies_in(CHANNEL, ts) if m.user == fake_slack.BOT_USER]
            assert replies == ["`add()` is defined in calc.py, line 1."]
            assert stage.slack.state.statuses[(CHANNEL, ts)] == ""
            assert "def add" in stage.model.requests[1].messages[-1]["content"]
            assert [name for name, _ in stage.slack.state.reactions[(CHANNEL, ts)]] == ["eyes"]


class TestLinear:
    async def test_an_agent_session_gets_activities_and_a_reply(self, tmp_path: Path) -> None:
        script = Script().tool_call("linear", action="comment", body="add() subtracts; I can fix it.").reply("Replied.")
        async with pipeline(tmp_path, script) as stage:
            await stage.accounts.link(Provider.LINEAR, "user-human-1", "user-ada")
            issue = stage.linear.state.add_issue("add() is wrong", f"It subtracts. repo:{REPOSITORY}")
            session = stage.linear.state.add_session()
            payload = fake_linear.agent_session_created(
                issue, session, comment_body=f"@drydock what is wrong with add()? repo:{REPOSITORY}"
            )
            response = await stage.deliver_linear(payload)
            assert response.status_code == 200, response.text
            thread_id = ids.linear_issue(fake_linear.ORGANIZATION, issue.id)

            await eventually(lambda: completed(stage, thread_id), within=60, what="the run to complete")

            activities = [(a.type, a.body) for a in stage.linear.state.activities if a.agent_session_id == session]
            assert activities[0][0] == "thought"
            assert ("response", "add() subtracts; I can fix it.") in activities
