"""``submit_plan`` and the writing tools under plan approval: the plan is recorded as held (a
``plan_submitted`` event), a revision is held again, and while it waits the pull request tools
and the framework's file writes refuse with a message the model reads."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command
from redis.asyncio import Redis

from drydock.accounts import AccountsStore
from drydock.accounts.records import RepositorySettings, UserProfile
from drydock.bus import Bus, EventType, RunEvent
from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.bus.streams import EVENTS_STREAM
from drydock.channels.buttons import APPROVE_ACTION
from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.middleware import Planning
from drydock.roles import Role
from drydock.threads.approvals import PLAN_REQUIRED_TEXT, Approvals, PlanGate
from drydock.threads.metadata import ThreadMetadataStore
from drydock.tools import build_tools
from tests.fakes.slack import TEAM, FakeSlack
from tests.tools.channel_fixtures import configured
from tests.tools.conftest import REPOSITORY, MakeContext


async def invoke(make_context: MakeContext, name: str, **arguments: Any) -> Any:
    (tool,) = build_tools([name], make_context())
    return await tool.ainvoke(arguments)


async def plan_approval_on(redis: Redis, keys: Keys, thread_id: str, *, owner: str = "user-ada") -> None:
    await AccountsStore(redis, keys, host="github.com").save_repository(
        RepositorySettings(full_name=REPOSITORY, plan_approval=True)
    )
    await ThreadMetadataStore(redis, keys).create(thread_id, kind=Role.CODER, fields={"owner": owner})


class TestSubmitPlan:
    async def test_without_plan_approval_nothing_is_held(self, make_context: MakeContext) -> None:
        answer = await invoke(make_context, "submit_plan", description="Fix add()", steps=["edit calc.py"])
        assert answer["submitted"] is False

    async def test_a_plan_is_held_and_a_revision_is_held_again(
        self, make_context: MakeContext, redis: Redis, keys: Keys, bus: Bus, thread_id: str, server_keys: ServerKeys
    ) -> None:
        await plan_approval_on(redis, keys, thread_id)
        first = await invoke(make_context, "submit_plan", description="Fix add()", steps=["edit calc.py"])
        assert (first["submitted"], first["revision"]) == (True, 1)
        approvals = Approvals(redis, keys, server_keys)
        await approvals.approve_plan(thread_id, by="user-ada")
        second = await invoke(
            make_context, "submit_plan", description="Fix add() and test it", steps=["edit calc.py", "add a test"]
        )
        assert second["revision"] == 2
        plan = await approvals.plan(thread_id)
        assert plan is not None
        assert (plan.approved, [todo["content"] for todo in plan.todos]) == (False, ["edit calc.py", "add a test"])
        stored = await bus.js.get_last_msg(EVENTS_STREAM, f"drydock.event.{thread_id}.{EventType.PLAN_SUBMITTED}")
        assert stored.data is not None
        assert RunEvent.model_validate_json(stored.data).data["revision"] == 2

    async def test_the_owners_profile_turns_it_on_too(
        self, make_context: MakeContext, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        accounts = AccountsStore(redis, keys, host="github.com")
        await accounts.save_repository(RepositorySettings(full_name=REPOSITORY))
        await accounts.save_profile(UserProfile(user_id="user-bo", plan_approval=True))
        await ThreadMetadataStore(redis, keys).create(thread_id, kind=Role.CODER, fields={"owner": "user-bo"})
        answer = await invoke(make_context, "submit_plan", description="Fix add()", steps=["edit calc.py"])
        assert answer["submitted"] is True


class TestPostedInSlack:
    async def test_the_plan_is_posted_in_the_thread_with_an_approve_button(
        self, make_context: MakeContext, settings: Settings, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        await plan_approval_on(redis, keys, thread_id)
        async with FakeSlack() as slack:
            outbound = Outbound.from_settings(
                configured(settings, slack={"bot_token": slack.state.token, "api_url": slack.api_url})
            )
            root = slack.state.add_message("C0GENERAL", "<@U0DRYBOT> fix the widget")
            address = ReplyAddress(
                channel=Channel.SLACK, address={"team": TEAM, "channel": "C0GENERAL", "thread_ts": root}
            )
            (tool,) = build_tools(["submit_plan"], make_context(reply_to=address, outbound=outbound))
            answer = await tool.ainvoke({"description": "Fix the widget", "steps": ["edit widget.py", "test it"]})
            await outbound.aclose()
        assert answer["posted"] is True
        (posted,) = [m for m in slack.state.messages.values() if m.thread_ts == root]
        assert "**Plan (revision 1)**" in posted.text
        assert "1. edit widget.py" in posted.text
        assert posted.blocks is not None
        (button,) = posted.blocks[1]["elements"]
        assert (button["action_id"], button["value"]) == (APPROVE_ACTION, "approve")


class TestWritingToolsRefuse:
    async def test_pull_request_tools_refuse_until_the_plan_is_approved(
        self, make_context: MakeContext, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        await plan_approval_on(redis, keys, thread_id)
        refused = await invoke(make_context, "open_pull_request", title="Fix", head="drydock/fix")
        assert refused == PLAN_REQUIRED_TEXT
        await invoke(make_context, "submit_plan", description="Fix add()", steps=["edit calc.py"])
        refused = await invoke(make_context, "update_pull_request", number=3, title="Fix")
        assert "plan revision 1 is waiting for this thread owner's approval" in refused

    async def test_file_writes_refuse_until_the_plan_is_approved(
        self, settings: Settings, redis: Redis, keys: Keys, thread_id: str, server_keys: ServerKeys
    ) -> None:
        await plan_approval_on(redis, keys, thread_id)
        gate = PlanGate.create(redis, keys, settings)
        assert gate is not None

        async def refusal() -> str | None:
            return await gate.refusal(thread_id, REPOSITORY)

        planning = Planning(refusal=refusal)
        ran: list[str] = []

        async def handler(request: ToolCallRequest) -> ToolMessage | Command[Any]:
            ran.append(request.tool_call["name"])
            return ToolMessage("done", tool_call_id=request.tool_call["id"])

        def call(name: str) -> ToolCallRequest:
            tool_call = {"name": name, "args": {}, "id": f"call-{name}", "type": "tool_call"}
            return ToolCallRequest(tool_call=tool_call, tool=None, state={}, runtime=None)  # type: ignore[arg-type]

        written = await planning.awrap_tool_call(call("write_file"), handler)
        assert isinstance(written, ToolMessage)
        assert (written.status, written.content) == ("error", PLAN_REQUIRED_TEXT)
        assert await planning.awrap_tool_call(call("read_file"), handler) is not None
        assert ran == ["read_file"]
        approvals = Approvals(redis, keys, server_keys)
        await approvals.submit_plan(thread_id, "Fix add()", [{"content": "edit calc.py"}])
        await approvals.approve_plan(thread_id, by="user-ada")
        await planning.awrap_tool_call(call("edit_file"), handler)
        assert ran == ["read_file", "edit_file"]
