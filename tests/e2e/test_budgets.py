"""Budgets end to end: a run stopped at its spend limit with a notice and continued once by the
thread's owner; someone else's continue refused; a day budget refusing a run before any sandbox
exists; the team's concurrency limit deferring a run until a place frees."""

from __future__ import annotations

import asyncio
from pathlib import Path

from drydock.accounts import Provider, RepositorySettings, TeamBudgets, TeamDefaults
from drydock.budgets import ActiveRuns
from drydock.bus import EventType
from drydock.threads import ids
from drydock.threads.continuation import Continuations
from drydock.threads.metadata import ThreadMetadataStore
from drydock.usage import CallUsage, UsageLedger, UsageScope
from tests.e2e.pipeline import MEMBER, ORG, REPOSITORY, SLACK_SECRET, Stage, pipeline
from tests.e2e.test_github_issue import ISSUE
from tests.fakes import signing
from tests.fakes import slack as fake_slack
from tests.fakes.github import webhooks
from tests.fakes.github.activity import activity_of
from tests.fakes.openai_server import Script
from tests.waiting import eventually

THREAD = ids.github_issue("github.com", ORG, "widgets", ISSUE)
OTHER_MEMBER = "monalisa"


async def set_budgets(stage: Stage, budgets: TeamBudgets) -> None:
    await stage.accounts.save_team(
        TeamDefaults(allowed_organizations=(ORG,), default_repository=REPOSITORY, budgets=budgets)
    )


def agent_comments(stage: Stage) -> list[str]:
    return [
        c.rendered
        for c in activity_of(stage.github.state).comments_on(REPOSITORY, ISSUE)
        if c.login not in {MEMBER, OTHER_MEMBER}
    ]


USER_IDS = {MEMBER: 5001, OTHER_MEMBER: 5002}


def comment_by(stage: Stage, login: str, body: str) -> dict[str, object]:
    """An issue comment by ``login``, with the same GitHub user id each time, as GitHub sends it."""
    comment = activity_of(stage.github.state).add_comment(REPOSITORY, ISSUE, body, login=login)
    return webhooks.issue_comment(
        ORG,
        "widgets",
        ISSUE,
        body,
        author=webhooks.user(login, USER_IDS[login]),
        comment_id=comment.id,
        installation_id=stage.installation.id,
    )


async def posted(stage: Stage, count: int = 1) -> list[str] | None:
    """The agent's comments once there are ``count`` of them."""
    found = agent_comments(stage)
    return found if len(found) >= count else None


async def ended(stage: Stage, kind: EventType) -> bool:
    return any(event.type is kind for event in await stage.events(THREAD))


def expensive_then_finish() -> Script:
    # 200,000 input tokens of gpt-5.1 at $1.25 per million: $0.25, past a $0.10 run limit.
    return (
        Script()
        .tool_call("execute", command="true")
        .usage(prompt=200_000, completion=10)
        .tool_call("github_comment", body="Finished after the continue.")
        .reply("Done.")
    )


class TestSpendLimit:
    async def test_a_run_stops_at_its_spend_limit_and_its_owner_continues_it_once(self, tmp_path: Path) -> None:
        async with pipeline(tmp_path, expensive_then_finish()) as stage:
            await set_budgets(stage, TeamBudgets(run_usd=0.10))
            await stage.deliver_github("issue_comment", comment_by(stage, MEMBER, "@drydock run the checks"))
            await eventually(lambda: ended(stage, EventType.STEP_LIMIT), within=60, what="the budget stop")
            await eventually(lambda: posted(stage), within=30, what="the pause notice")

            assert len(stage.model.requests) == 1
            notice = agent_comments(stage)[0]
            assert notice.startswith("I paused at this run's spend limit of $0.10: I spent $0.25 in this run.")
            assert "`@drydock continue`" in notice
            stop = next(e for e in await stage.events(THREAD) if e.type is EventType.STEP_LIMIT)
            assert stop.data["budget"] == "run"
            assert await Continuations(stage.runtime.redis, stage.runtime.keys).paused(THREAD) is not None

            await stage.deliver_github("issue_comment", comment_by(stage, MEMBER, "@drydock continue"))
            await eventually(lambda: ended(stage, EventType.COMPLETED), within=60, what="the continued run")

            said = agent_comments(stage)
            assert said[1] == "Continuing, as octocat asked: this run has one more allowance."
            assert said[2] == "Finished after the continue."
            assert len(stage.model.requests) == 3
            # The continued run saw the continue, after the earlier conversation.
            assert "@drydock continue" in stage.model.requests[1].texts("user")[-1]
            assert await Continuations(stage.runtime.redis, stage.runtime.keys).paused(THREAD) is None

    async def test_someone_elses_continue_is_refused(self, tmp_path: Path) -> None:
        async with pipeline(tmp_path, expensive_then_finish()) as stage:
            activity_of(stage.github.state).add_member(ORG, OTHER_MEMBER)
            await set_budgets(stage, TeamBudgets(run_usd=0.10))
            await stage.deliver_github("issue_comment", comment_by(stage, MEMBER, "@drydock run the checks"))
            await eventually(lambda: posted(stage), within=60, what="the pause notice")

            await stage.deliver_github("issue_comment", comment_by(stage, OTHER_MEMBER, "@drydock continue"))
            await eventually(lambda: posted(stage, 2), within=60, what="the refusal")

            assert agent_comments(stage)[1] == (
                "monalisa, only the thread's owner or an administrator can continue it past its budget; I stay paused."
            )
            assert len(stage.model.requests) == 1
            assert await Continuations(stage.runtime.redis, stage.runtime.keys).paused(THREAD) is not None


class TestSlackButton:
    async def test_the_owner_presses_continue_under_the_pause_notice(self, tmp_path: Path) -> None:
        channel = "C0WIDGETS"
        script = (
            Script()
            .tool_call("execute", command="true")
            .usage(prompt=200_000, completion=10)
            .tool_call("slack_reply", text="Finished after the button.")
            .reply("Done.")
        )
        async with pipeline(tmp_path, script) as stage:
            await set_budgets(stage, TeamBudgets(run_usd=0.10))
            await stage.accounts.link(Provider.SLACK, "U0HUMAN", "user-ada")
            text = f"<@{fake_slack.BOT_USER}> run the checks repo:{REPOSITORY}"
            ts = stage.slack.state.add_message(channel, text)
            await stage.deliver_slack(fake_slack.app_mention(channel, ts, text))
            thread_id = ids.slack_thread(fake_slack.TEAM, channel, ts)

            def replies() -> list[fake_slack.PostedMessage]:
                return [m for m in stage.slack.state.replies_in(channel, ts) if m.user == fake_slack.BOT_USER]

            async def replied(count: int) -> bool:
                return len(replies()) >= count

            await eventually(lambda: replied(1), within=60, what="the pause notice")
            notice = replies()[0]
            assert notice.text.startswith("I paused at this run's spend limit of $0.10")
            assert notice.blocks is not None
            button = notice.blocks[1]["elements"][0]
            assert (button["action_id"], button["text"]["text"]) == ("drydock_continue", "Continue")

            press = fake_slack.block_actions(channel, notice.ts, button["action_id"], button["value"], thread_ts=ts)
            request = signing.slack_interaction(SLACK_SECRET, press)
            response = await stage.ingress.post(request.path, content=request.body, headers=request.headers)
            assert response.status_code == 200, response.text

            await eventually(lambda: replied(3), within=60, what="the continued run's reply")
            assert [m.text for m in replies()[1:]] == [
                "Continuing, as <@U0HUMAN> asked: this run has one more allowance.",
                "Finished after the button.",
            ]
            assert await Continuations(stage.runtime.redis, stage.runtime.keys).paused(thread_id) is None


class TestDayBudget:
    async def test_a_spent_day_budget_refuses_the_run_before_any_sandbox(self, tmp_path: Path) -> None:
        async with pipeline(tmp_path, Script().reply("Never asked.")) as stage:
            await set_budgets(stage, TeamBudgets(repository_day_usd=1.0))
            ledger = UsageLedger(stage.runtime.redis, stage.runtime.keys)
            spent = CallUsage("gpt-5.1", 1_000_000, 0, 0, 0, 1.25)
            await ledger.add(
                UsageScope(run_id="earlier", thread_id="earlier", role="coder", repository=REPOSITORY), spent
            )

            await stage.deliver_github("issue_comment", comment_by(stage, MEMBER, "@drydock one more thing"))
            await eventually(lambda: posted(stage), within=60, what="the refusal")

            assert agent_comments(stage)[0].startswith(
                f"I paused at the day budget of $1.00 for {REPOSITORY}: I spent $1.25 today (UTC)."
            )
            assert stage.model.requests == []
            thread = await ThreadMetadataStore(stage.runtime.redis, stage.runtime.keys).get(THREAD)
            assert thread.sandbox_id is None
            root = stage.settings.sandbox.local_root
            assert root is not None
            assert not await asyncio.to_thread(lambda: any(Path(root).glob("sbx-*")))


class TestConcurrency:
    async def test_a_full_team_defers_the_run_until_a_place_frees(self, tmp_path: Path) -> None:
        script = Script().tool_call("github_comment", body="Ran once a place was free.").reply("Done.")
        async with pipeline(tmp_path, script) as stage:
            await set_budgets(stage, TeamBudgets(active_runs=1))
            await stage.accounts.save_repository(RepositorySettings(full_name=REPOSITORY))
            active = ActiveRuns(stage.runtime.redis, stage.runtime.keys)
            assert await active.claim("another-thread", 1)

            await stage.deliver_github("issue_comment", comment_by(stage, MEMBER, "@drydock when you can"))
            await eventually(lambda: posted(stage), within=60, what="the deferral notice")
            assert agent_comments(stage)[0] == (
                "1 run is going on in the team, its limit of runs at once: I start as soon as a place frees."
            )
            assert stage.model.requests == []

            await active.release("another-thread")
            await eventually(lambda: ended(stage, EventType.COMPLETED), within=60, what="the deferred run")
            assert agent_comments(stage)[1] == "Ran once a place was free."

            async def released() -> bool:
                return await active.count() == 0

            await eventually(released, within=30, what="the run's place given back")
