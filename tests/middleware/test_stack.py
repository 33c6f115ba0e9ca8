"""The middleware order is encoded once (``drydock.middleware.stack``) and pinned here against
its documentation (the numbered list in the module docstring, which follows DESIGN.md
section 6) and against the lists the builders return."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage
from langgraph_checkpoint_plainredis import AsyncRedisSaver
from redis.asyncio import Redis

from drydock.bus import Author, Bus, Channel, InboxMessage, ReplyAddress
from drydock.channels.run_status import RunStatus
from drydock.infra.redis import Keys
from drydock.middleware import stack
from drydock.middleware.provider_edge import ProviderEdge
from drydock.middleware.scoped_instructions import BackendInstructionFiles
from drydock.middleware.stack import (
    ANALYZER_ORDER,
    CODER_ORDER,
    REVIEWER_ORDER,
    analyzer_middleware,
    at_the_provider_edge,
    coder_middleware,
    reviewer_middleware,
)
from drydock.middleware.strip_reasoning import StripMalformedReasoning
from drydock.sandbox.failures import SandboxFailures
from drydock.threads import Inbox, StoredMessage
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import RecordingNotifier, RecordingStatus, chat_model, run_config

DOCUMENTED = [
    "sanitize and normalize tool inputs",
    "limit model calls, ending gracefully at the limit",
    "turn tool exceptions into tool messages",
    "append ancestor AGENTS.md files to file reads, once per run",
    "inject queued inbox messages before the next model call",
    "update external status indicators at model-call boundaries",
    "replace an empty model reply with a continue or confirm-completion call",
    "notify the source channel when the step limit is reached",
    "trip a circuit breaker after repeated sandbox failures",
    "the fallback model, only when one distinct from the primary is configured",
    "strip malformed reasoning blocks immediately before the provider call",
]
"""DESIGN.md section 6, items 1-11, as the stack's docstring words them."""

REVIEWER_LEAVES_OUT = {4, 5, 9, 10}
"""Scoped instruction files, inbox injection, sandbox recovery, fallback model."""

ANALYZER_LEAVES_OUT = REVIEWER_LEAVES_OUT | {6, 8}
"""The reviewer's omissions, and also status indicators and the step-limit notice (no conversation)."""


def _docstring_list() -> list[tuple[int, str, str]]:
    pattern = re.compile(r"^(\d+)\. ``(\w+)``: (.+)$")
    return [
        (int(m.group(1)), m.group(2), m.group(3))
        for line in (stack.__doc__ or "").splitlines()
        if (m := pattern.match(line.strip()))
    ]


async def _whole_coder_list() -> list[AgentMiddleware[Any, Any, Any]]:
    """The coder's list with every optional member, the fallback model included."""
    async with ScriptedModelServer() as server:
        return coder_middleware(
            thread_id="t", inbox=_Nothing(), sandbox_failures=_NoFailures(), fallback=chat_model(server, "gpt-5-mini")
        )


class _Nothing:
    async def read_after(self, thread_id: str, cursor: int = 0, *, limit: int | None = None) -> list[StoredMessage]:
        return []


class _NoFailures:
    async def count(self, thread_id: str) -> int:
        return 0

    async def record(self, thread_id: str) -> int:
        return 1

    async def reset(self, thread_id: str) -> None:
        return None


class TestOrder:
    def test_the_docstring_documents_the_design_order(self) -> None:
        documented = _docstring_list()
        assert [number for number, _, _ in documented] == list(range(1, 12))
        assert [text for _, _, text in documented] == DOCUMENTED
        assert tuple(name for _, name, _ in documented) == CODER_ORDER

    async def test_the_coder_list_is_built_in_the_documented_order(self) -> None:
        assert tuple(m.name for m in await _whole_coder_list()) == CODER_ORDER

    def test_without_a_fallback_model_only_the_fallback_is_left_out(self) -> None:
        built = coder_middleware(thread_id="t", inbox=_Nothing(), sandbox_failures=_NoFailures())
        assert tuple(m.name for m in built) == tuple(n for n in CODER_ORDER if n != "ModelFallbackMiddleware")

    def test_the_reviewer_list_leaves_out_what_the_design_says(self) -> None:
        expected = tuple(name for number, name, _ in _docstring_list() if number not in REVIEWER_LEAVES_OUT)
        assert expected == REVIEWER_ORDER
        assert tuple(m.name for m in reviewer_middleware(thread_id="t")) == REVIEWER_ORDER

    def test_the_analyzer_list_is_the_leanest(self) -> None:
        expected = tuple(name for number, name, _ in _docstring_list() if number not in ANALYZER_LEAVES_OUT)
        assert expected == ANALYZER_ORDER
        assert tuple(m.name for m in analyzer_middleware(thread_id="t")) == ANALYZER_ORDER

    async def test_no_middleware_adds_graph_steps_to_an_agent_step(self) -> None:
        """A ``before_model`` or ``after_model`` hook is a graph node, with its own checkpoint,
        on every agent step; our middleware wraps the model call instead."""
        coder = await _whole_coder_list()
        for middleware in [*coder, *reviewer_middleware(thread_id="t"), *analyzer_middleware(thread_id="t")]:
            for hook in ("before_model", "abefore_model", "after_model", "aafter_model"):
                assert getattr(type(middleware), hook) is getattr(AgentMiddleware, hook), f"{middleware.name}.{hook}"

    async def test_no_middleware_adds_graph_steps_to_a_run_start(self) -> None:
        """A ``before_agent`` hook is a graph node, with its own checkpoint, before every run's
        first model call; the step limit's count is reset by a new turn's input instead."""
        coder = await _whole_coder_list()
        for middleware in [*coder, *reviewer_middleware(thread_id="t"), *analyzer_middleware(thread_id="t")]:
            for hook in ("before_agent", "abefore_agent"):
                assert getattr(type(middleware), hook) is getattr(AgentMiddleware, hook), f"{middleware.name}.{hook}"


class TestProviderEdge:
    """The whole built stacks, the framework's additions included, are pinned per role and
    subagent in ``tests/graphs/test_roles.py``; here the edge itself."""

    def test_the_last_step_moves_into_the_edge_which_takes_the_frameworks_last_slot(self) -> None:
        stack = reviewer_middleware(thread_id="t")
        strip = stack[-1]
        placed = at_the_provider_edge(stack)
        assert [m.name for m in placed[:-1]] == list(REVIEWER_ORDER[:-1])
        edge = placed[-1]
        assert isinstance(edge, ProviderEdge)
        assert edge.strip is strip
        assert edge.name == "UnsupportedContentMiddleware"

    def test_a_stack_that_does_not_end_with_the_strip_is_refused(self) -> None:
        stack = analyzer_middleware(thread_id="t")
        with pytest.raises(ValueError, match="ends with StripMalformedReasoning, not EmptyReplyNudge"):
            at_the_provider_edge(stack[:-1])
        assert isinstance(stack[-1], StripMalformedReasoning)


class TestCoderStack:
    async def test_the_whole_stack_runs_in_a_deep_agent(
        self, tmp_path: Path, bus: Bus, redis: Redis, keys: Keys, checkpointer: AsyncRedisSaver, thread_id: str
    ) -> None:
        (tmp_path / "repo/app").mkdir(parents=True)
        (tmp_path / "repo/app/AGENTS.md").write_text("App rule: keep handlers small.")
        (tmp_path / "repo/app/main.py").write_text("def handler(): ...\n")
        backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
        inbox = Inbox(bus)
        await inbox.append(
            InboxMessage(
                delivery_id=str(uuid.uuid4()),
                thread_id=thread_id,
                channel=Channel.SLACK,
                author=Author(channel=Channel.SLACK, external_id="U1", name="carol"),
                text="tidy up app/main.py",
                reply_to=ReplyAddress(channel=Channel.SLACK, address={"channel": "C1", "thread_ts": "1.0"}),
            )
        )
        status, notifier = RecordingStatus(), RecordingNotifier()
        script = (
            Script()
            .tool_call("read_file", file_path="/repo/app/main.py")
            .tool_call_raw("write_file", '{"file_path": "/repo/app/main.py", "content": ')
            .empty()
            .reply("Tidied up and replied in Slack.")
        )
        async with ScriptedModelServer(script) as server:
            middleware = coder_middleware(
                thread_id=thread_id,
                inbox=inbox,
                sandbox_failures=SandboxFailures(redis, keys),
                status=status,
                notifier=notifier,
                instructions=BackendInstructionFiles(backend),
                repository_root="/repo",
            )
            agent = create_deep_agent(
                chat_model(server),
                [],
                backend=backend,
                middleware=at_the_provider_edge(middleware),
                checkpointer=checkpointer,
            )
            result = await agent.ainvoke({"messages": []}, run_config(thread_id))

        assert "carol wrote on slack" in server.requests[0].texts("user")[0]
        answers = {m.name: m for m in result["messages"] if isinstance(m, ToolMessage)}
        assert "App rule: keep handlers small." in answers["read_file"].text
        assert answers["write_file"].status == "error"
        assert "confirm_completion" in answers
        assert result["messages"][-1].text == "Tidied up and replied in Slack."
        assert status.shown == [RunStatus.WORKING, RunStatus.FINISHED]
        assert notifier.notices == []
        assert result["inbox_cursor"] > 0
        assert len(server.requests) == 4
