"""``github_comment`` against the fake GitHub: where the comment goes, as whom, and what the
thread records about it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.bus.envelopes import Channel, EventType, ReplyAddress
from drydock.channels.outbound import Outbound
from drydock.checkpoints import open_checkpointer
from drydock.config import Settings
from drydock.effects import EffectLedger, bound_call, marked
from drydock.infra.redis import Keys
from drydock.middleware.tool_errors import ToolErrorsAsMessages
from drydock.threads.pr_records import PullRequestRecord, PullRequestStore
from drydock.tools import github_comment
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import CheckpointLoss, chat_model, run_config
from tests.tools.channel_fixtures import GithubWorld, github_world, last_event
from tests.tools.conftest import REPOSITORY, MakeContext, github_reply_to


def visible(body: str) -> str:
    """A comment's text as GitHub renders it: without the hidden effect marker."""
    text, _, hidden = body.partition("\n\n<!-- drydock:effect:")
    assert hidden.endswith(" -->"), body
    return text


@pytest.fixture(scope="module")
async def github() -> AsyncIterator[GithubWorld]:
    async with github_world() as world:
        yield world


@pytest.fixture
async def outbound(settings: Settings, github: GithubWorld) -> AsyncIterator[Outbound]:
    clients = Outbound.from_settings(github.settings(settings))
    yield clients
    await clients.aclose()


class TestTarget:
    async def test_without_a_number_it_comments_on_the_thread_s_own_issue(
        self, github: GithubWorld, outbound: Outbound, make_context: MakeContext, bus: Bus, thread_id: str
    ) -> None:
        github.activity.open_issue(REPOSITORY, 7)
        tool = github_comment.build(make_context(reply_to=github_reply_to(number=7), outbound=outbound))

        result = await tool.ainvoke({"body": "Working on it."})

        comments = github.activity.comments_on(REPOSITORY, 7)
        assert [visible(comment.body) for comment in comments] == ["Working on it."]
        assert comments[0].login == "drydock[bot]"
        assert result["number"] == 7
        assert result["html_url"].endswith(f"#issuecomment-{comments[0].id}")
        event = await last_event(bus, thread_id, EventType.MESSAGE_POSTED)
        assert event is not None
        assert event.data == {"channel": "github", "target": f"{REPOSITORY}#7", "url": result["html_url"]}

    async def test_a_number_names_another_issue(
        self, github: GithubWorld, outbound: Outbound, make_context: MakeContext
    ) -> None:
        github.activity.open_issue(REPOSITORY, 21)
        tool = github_comment.build(make_context(reply_to=github_reply_to(number=7), outbound=outbound))

        await tool.ainvoke({"body": "See also #7.", "number": 21})

        assert [visible(comment.body) for comment in github.activity.comments_on(REPOSITORY, 21)] == ["See also #7."]

    async def test_a_thread_from_elsewhere_comments_on_its_only_pull_request(
        self,
        github: GithubWorld,
        outbound: Outbound,
        make_context: MakeContext,
        redis: Redis,
        keys: Keys,
        thread_id: str,
    ) -> None:
        github.activity.open_issue(REPOSITORY, 31, pull_request=True)
        await PullRequestStore(redis, keys).record(
            PullRequestRecord("github.com", REPOSITORY, 31, thread_id, "drydock/abc-fix")
        )
        slack = ReplyAddress(channel=Channel.SLACK, address={"team": "T1", "channel": "C1", "thread_ts": "1.2"})
        tool = github_comment.build(make_context(reply_to=slack, outbound=outbound))

        await tool.ainvoke({"body": "Ready for review."})

        assert [visible(comment.body) for comment in github.activity.comments_on(REPOSITORY, 31)] == [
            "Ready for review."
        ]

    async def test_a_thread_from_elsewhere_without_a_pull_request_must_name_the_number(
        self, outbound: Outbound, make_context: MakeContext
    ) -> None:
        slack = ReplyAddress(channel=Channel.SLACK, address={"team": "T1", "channel": "C1", "thread_ts": "1.2"})
        tool = github_comment.build(make_context(reply_to=slack, outbound=outbound))

        answer = await tool.ainvoke({"body": "hello"})

        assert "say which one with `number`" in answer


class TestRefusals:
    async def test_an_issue_that_does_not_exist_is_reported_and_nothing_is_posted(
        self, github: GithubWorld, outbound: Outbound, make_context: MakeContext, bus: Bus, thread_id: str
    ) -> None:
        tool = github_comment.build(make_context(outbound=outbound))

        answer = await tool.ainvoke({"body": "hello", "number": 4040})

        assert "404" in answer
        assert github.activity.comments_on(REPOSITORY, 4040) == []
        assert await last_event(bus, thread_id, EventType.MESSAGE_POSTED) is None

    async def test_without_github_credentials_it_says_so(self, make_context: MakeContext) -> None:
        tool = github_comment.build(make_context())

        answer = await tool.ainvoke({"body": "hello", "number": 1})

        assert answer == "GitHub is not configured for this Drydock installation."

    async def test_a_thread_without_a_repository_is_refused(
        self, outbound: Outbound, make_context: MakeContext
    ) -> None:
        tool = github_comment.build(make_context(repository=None, outbound=outbound))

        answer = await tool.ainvoke({"body": "hello", "number": 1})

        assert answer == "This thread has no repository on GitHub."


class TestReplay:
    """A tool call replayed after a crash (the run's checkpoint still holds the call) leaves one
    comment, wherever the crash fell."""

    CALL = "step-12.0"
    EFFECT = f"{CALL}:github_comment"

    async def test_a_crash_before_the_write_posts_once_on_replay(
        self,
        github: GithubWorld,
        outbound: Outbound,
        make_context: MakeContext,
        redis: Redis,
        keys: Keys,
        thread_id: str,
    ) -> None:
        github.activity.open_issue(REPOSITORY, 41)
        await EffectLedger(redis, keys).claim(thread_id, self.EFFECT)
        tool = github_comment.build(make_context(reply_to=github_reply_to(number=41), outbound=outbound))

        with bound_call(self.CALL):
            await tool.ainvoke({"body": "Done."})

        assert [visible(c.body) for c in github.activity.comments_on(REPOSITORY, 41)] == ["Done."]

    async def test_a_crash_after_the_write_finds_the_comment_by_its_marker(
        self,
        github: GithubWorld,
        outbound: Outbound,
        make_context: MakeContext,
        redis: Redis,
        keys: Keys,
        thread_id: str,
    ) -> None:
        github.activity.open_issue(REPOSITORY, 42)
        for n in range(3):
            github.activity.add_comment(REPOSITORY, 42, f"chatter {n}", login="octocat")
        await EffectLedger(redis, keys).claim(thread_id, self.EFFECT)
        assert outbound.github is not None
        first = await outbound.github.post_comment(None, REPOSITORY, 42, marked("Done.", self.EFFECT))
        tool = github_comment.build(make_context(reply_to=github_reply_to(number=42), outbound=outbound))

        with bound_call(self.CALL):
            result = await tool.ainvoke({"body": "Done."})

        ours = [c for c in github.activity.comments_on(REPOSITORY, 42) if c.login == "drydock[bot]"]
        assert [c.id for c in ours] == [first["id"]]
        assert result["id"] == first["id"]
        assert (await EffectLedger(redis, keys).claim(thread_id, self.EFFECT)) is not None

    async def test_a_crash_after_the_ledger_record_returns_the_recorded_comment(
        self, github: GithubWorld, outbound: Outbound, make_context: MakeContext
    ) -> None:
        github.activity.open_issue(REPOSITORY, 43)
        tool = github_comment.build(make_context(reply_to=github_reply_to(number=43), outbound=outbound))

        with bound_call(self.CALL):
            first = await tool.ainvoke({"body": "Done."})
        with bound_call(self.CALL):
            again = await tool.ainvoke({"body": "Done."})

        assert len(github.activity.comments_on(REPOSITORY, 43)) == 1
        assert again == first

    async def test_two_calls_of_one_run_post_two_comments(
        self, github: GithubWorld, outbound: Outbound, make_context: MakeContext
    ) -> None:
        github.activity.open_issue(REPOSITORY, 44)
        tool = github_comment.build(make_context(reply_to=github_reply_to(number=44), outbound=outbound))

        with bound_call("step-12.0"):
            await tool.ainvoke({"body": "One."})
        with bound_call("step-14.0"):
            await tool.ainvoke({"body": "Two."})

        assert [visible(c.body) for c in github.activity.comments_on(REPOSITORY, 44)] == ["One.", "Two."]


class TestModelAskedAgain:
    """The run posted, then the checkpoints after the model's step were lost (a store error, a
    worker killed before the asynchronous checkpoint write): the resumed run asks the model again,
    which names its call with a new id. The effect is keyed by the step's position, so the comment
    stays one, found in the ledger or, when the crash also came before the ledger's record, by its
    marker; a follow-up run comments again."""

    @pytest.mark.parametrize("recorded", [True, False], ids=["ledger-recorded", "ledger-claimed-only"])
    async def test_a_re_asked_model_step_posts_once(
        self,
        recorded: bool,
        github: GithubWorld,
        outbound: Outbound,
        make_context: MakeContext,
        settings: Settings,
        redis: Redis,
        keys: Keys,
        thread_id: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        number = 51 if recorded else 52
        github.activity.open_issue(REPOSITORY, number)
        tool = github_comment.build(make_context(reply_to=github_reply_to(number=number), outbound=outbound))
        script = (
            Script()
            .tool_call("github_comment", body="Done.")
            .reply("Posted.")
            .tool_call("github_comment", body="Done, as I said.")
            .reply("Posted.")
            .tool_call("github_comment", body="Here is more.")
            .reply("Posted again.")
        )
        async with (
            open_checkpointer(settings.redis.model_copy(update={"key_prefix": keys.prefix})) as checkpointer,
            ScriptedModelServer(script) as server,
        ):
            agent = create_agent(
                chat_model(server), [tool], middleware=[ToolErrorsAsMessages(thread_id)], checkpointer=checkpointer
            )
            loss = CheckpointLoss(monkeypatch, checkpointer, step=0)
            first = await agent.ainvoke({"messages": [HumanMessage("please comment")]}, run_config(thread_id))
            loss.restore()
            if not recorded:
                effect = keys.effect(thread_id, "step-2.0:github_comment")
                await redis.hdel(effect, "result")
                await redis.hset(effect, "state", "claimed")
            resumed = await agent.ainvoke(None, run_config(thread_id))
            ids = [_tool_call_ids(run["messages"]) for run in (first, resumed)]
            comments = github.activity.comments_on(REPOSITORY, number)

            assert ids[0] != ids[1]
            assert [visible(c.body) for c in comments] == ["Done."]
            assert next(m for m in resumed["messages"] if isinstance(m, ToolMessage)).status != "error"

            await agent.ainvoke({"messages": [HumanMessage("and more")]}, run_config(thread_id))

        comments = github.activity.comments_on(REPOSITORY, number)
        assert [visible(c.body) for c in comments] == ["Done.", "Here is more."]


def _tool_call_ids(messages: list[BaseMessage]) -> list[str]:
    return [str(call["id"]) for m in messages if isinstance(m, AIMessage) for call in m.tool_calls]
