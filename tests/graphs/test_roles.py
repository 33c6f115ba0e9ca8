"""Each role's agent as the framework builds it (deepagents 0.7.32): its exact tools and its
exact middleware order, the framework's additions and its subagent included, read from the
built graph; what a reviewer run gets when it asks for a tool that writes; a ``task`` call
spending the run's step budget; the coder's plan driving the empty-reply guard."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from drydock.graphs import subagents
from drydock.graphs.analyzer import analyzer_graph, analyzer_run
from drydock.graphs.inputs import AgentInputs
from drydock.graphs.reviewer import reviewer_graph, reviewer_run
from drydock.graphs.shared import RunBound, RunContext
from drydock.graphs.subagents import NoSubagents
from drydock.middleware import (
    ANALYZER_ORDER,
    CODER_ORDER,
    REVIEWER_ORDER,
    Planning,
    ProviderEdge,
    RunLimits,
    StopReason,
    stop_reason,
)
from drydock.middleware.empty_reply import CONTINUE
from drydock.models import BUILTIN_MODELS
from drydock.roles import Role
from drydock.sandbox.providers.local import LocalProvider
from drydock.worker.roles.analyzer import TOOLS as ANALYZER_TOOLS
from drydock.worker.roles.coder import TOOLS as CODER_TOOLS
from drydock.worker.roles.reviewer import TOOLS as REVIEWER_TOOLS
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.graphs.built import Graph, Stacks, coder_and_run, model_call_chain, recording, subagent, tool_names
from tests.graphs.conftest import Parts
from tests.middleware.conftest import RecordingNotifier, chat_model, run_config

HEAD = ["FilesystemMiddleware", "SubAgentMiddleware", "_ParentNotifierMiddleware", "SummarizationMiddleware"]
HEAD += ["PatchToolCallsMiddleware"]
"""What ``create_deep_agent`` puts before the caller's middleware."""
TAIL = ["AnthropicPromptCachingMiddleware", "UnsupportedContentMiddleware"]
"""What it puts after: prompt caching, then its last slot, which the provider edge takes."""
SUBAGENT_HEAD = ["FilesystemMiddleware", "SummarizationMiddleware", "PatchToolCallsMiddleware"]
"""What the framework gives its general-purpose subagent before the role's stack."""

FILE_TOOLS = ["ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep", "execute"]
READ_TOOLS = ["ls", "read_file", "glob", "grep"]
NUDGES = ["continue_working", "confirm_completion"]
"""The empty-reply guard's tools: registered, hidden from the model."""


def _without_strip(order: tuple[str, ...]) -> list[str]:
    assert order[-1] == "StripMalformedReasoning"
    return list(order[:-1])


async def _build(
    parts: Parts, role: Role, factory: Callable[[AgentInputs], Graph], monkeypatch: pytest.MonkeyPatch
) -> tuple[Graph, Stacks]:
    async with ScriptedModelServer() as server:
        with recording(monkeypatch) as stacks:
            graph = factory(parts.inputs(role, server))
    return graph, stacks


def _no_node_per_step(graph: Graph) -> None:
    """No middleware of ours, nor the coder's plan, adds a graph node (and a checkpoint) to every step."""
    assert not [name for name in graph.nodes if name.endswith(("before_model", "after_model"))]


def _edge_is_innermost(graph: Graph, run: RunContext | None = None) -> None:
    chain = model_call_chain(graph)
    edge = chain[-1]
    if isinstance(edge, RunBound):
        assert run is not None, "a shared graph's edge is its run's"
        edge = run.middleware[edge.position]
    assert isinstance(edge, ProviderEdge)
    assert edge.steps == ("UnsupportedContentMiddleware", "StripMalformedReasoning")
    assert "AnthropicPromptCachingMiddleware" in [m.name for m in chain[:-1]]


class TestTheBuiltRoles:
    async def test_the_coder_and_its_subagent(self, parts: Parts, monkeypatch: pytest.MonkeyPatch) -> None:
        async with ScriptedModelServer() as server:
            with recording(monkeypatch) as stacks:
                coder, run = coder_and_run(parts.inputs(Role.CODER, server))
                general = subagent(coder, "general-purpose", run)

        assert tool_names(coder) == [*FILE_TOOLS, "task", "write_todos", *NUDGES, *CODER_TOOLS]
        steps = _without_strip(CODER_ORDER)
        steps.remove("ModelFallbackMiddleware")
        assert stacks.names("coder") == [*HEAD, "RunTools", "RunRequest", "TodoListMiddleware", *steps, *TAIL]
        planning = stacks.by_agent["coder"][len(HEAD) + 2]
        assert isinstance(planning, RunBound)
        assert planning.kind is Planning
        _edge_is_innermost(coder, run)
        _no_node_per_step(coder)

        assert tool_names(general) == [*FILE_TOOLS, *NUDGES, *CODER_TOOLS]
        assert stacks.names("general-purpose") == [*SUBAGENT_HEAD, *steps, *TAIL]
        _edge_is_innermost(general)
        _no_node_per_step(general)

    async def test_the_coders_subagent_is_built_at_its_first_call(
        self, parts: Parts, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        built: list[AgentInputs] = []
        middleware = subagents.coder_subagent_middleware

        def counted(inputs: AgentInputs, *rest: Any) -> Any:
            built.append(inputs)
            return middleware(inputs, *rest)

        monkeypatch.setattr(subagents, "coder_subagent_middleware", counted)
        async with ScriptedModelServer() as server:
            inputs = parts.inputs(Role.CODER, server)
            coder, run = coder_and_run(inputs)
            assert built == []
            subagent(coder, "general-purpose", run)
            subagent(coder, "general-purpose", run)
        assert built == [inputs]

    async def test_the_reviewer_reads_only_and_has_no_subagent(
        self, parts: Parts, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async with ScriptedModelServer() as server:
            with recording(monkeypatch) as stacks:
                inputs = parts.inputs(Role.REVIEWER, server)
                reviewer, run = reviewer_graph(inputs), reviewer_run(inputs)

        assert tool_names(reviewer) == [*READ_TOOLS, *NUDGES, *REVIEWER_TOOLS, "git"]
        assert stacks.names("reviewer") == [*HEAD, "RunTools", "RunRequest", *_without_strip(REVIEWER_ORDER), *TAIL]
        assert isinstance(stacks.by_agent["reviewer"][1], NoSubagents)
        _edge_is_innermost(reviewer, run)
        _no_node_per_step(reviewer)

    async def test_the_analyzer_keeps_its_one_saving_tool(self, parts: Parts, monkeypatch: pytest.MonkeyPatch) -> None:
        async with ScriptedModelServer() as server:
            with recording(monkeypatch) as stacks:
                inputs = parts.inputs(Role.ANALYZER, server)
                analyzer, run = analyzer_graph(inputs), analyzer_run(inputs)

        assert tool_names(analyzer) == [*READ_TOOLS, *NUDGES, *ANALYZER_TOOLS]
        steps = _without_strip(ANALYZER_ORDER)
        assert stacks.names("analyzer") == [*HEAD, "RunTools", "RunRequest", *steps, "SkillsMiddleware", *TAIL]
        assert isinstance(stacks.by_agent["analyzer"][1], NoSubagents)
        _edge_is_innermost(analyzer, run)


async def _commit_repository(parts: Parts) -> None:
    repo = shlex.quote(parts.repository)
    script = (
        f"mkdir -p {repo} && cd {repo} && git init -q -b main"
        " && printf 'def add(a, b):\\n    return a - b\\n' > calc.py && git add calc.py"
        " && git -c user.name=Ann -c user.email=ann@example.com commit -qm 'Add add()'"
    )
    result = await parts.sandbox.aexecute(script)
    assert result.exit_code == 0, result.output


def _answers(messages: list[Any]) -> dict[str, str]:
    return {str(m.name): m.text for m in messages if isinstance(m, ToolMessage)}


class TestEveryModel:
    @pytest.mark.parametrize("model", [spec.id for spec in BUILTIN_MODELS])
    async def test_the_coder_plans_and_strips_last_whatever_the_model(
        self, parts: Parts, model: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async with ScriptedModelServer() as server:
            with recording(monkeypatch) as stacks:
                coder, run = coder_and_run(parts.inputs(Role.CODER, server, model=chat_model(server, model)))

        assert "write_todos" in tool_names(coder)
        assert stacks.names("coder")[-len(TAIL) :] == TAIL
        _edge_is_innermost(coder, run)
        _edge_is_innermost(subagent(coder, "general-purpose", run))


class TestReviewerRun:
    async def test_a_reviewer_asking_for_a_shell_or_a_write_is_told_they_do_not_exist(self, parts: Parts) -> None:
        await _commit_repository(parts)
        target = f"{parts.repository}/calc.py"
        script = (
            Script()
            .tool_call("execute", command=f"echo changed > {target} && git -C {parts.repository} commit -am x")
            .tool_call("write_file", file_path=f"{parts.repository}/new.py", content="x = 1\n")
            .tool_call("git", command="log", args=["--oneline"])
            .reply("Nothing to change.")
        )
        async with ScriptedModelServer(script) as server:
            inputs = parts.inputs(Role.REVIEWER, server)
            reviewer = reviewer_graph(inputs)
            result = await reviewer.ainvoke({"messages": []}, run_config(parts.thread_id), context=reviewer_run(inputs))

        errors = [m.text for m in result["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
        assert any("execute is not a valid tool" in text for text in errors)
        assert any("write_file is not a valid tool" in text for text in errors)
        assert "Add add()" in _answers(result["messages"])["git"]
        assert all("execute" not in r.tool_names and "write_file" not in r.tool_names for r in server.requests)
        unchanged = await parts.sandbox.aexecute(
            f"cat {shlex.quote(target)}; ls {shlex.quote(parts.repository)}; git -C {parts.repository} log --oneline"
        )
        assert "return a - b" in unchanged.output
        assert "new.py" not in unchanged.output
        assert unchanged.output.count("Add add()") == 1


class TestSharedStepBudget:
    async def test_a_task_calls_model_calls_count_against_the_runs_step_limit(self, parts: Parts) -> None:
        script = (
            Script()
            .tool_call("task", description="List the workspace.", subagent_type="general-purpose")
            .tool_call("ls", path="/")
            .reply("The workspace is empty.")
            .reply("unreachable: the parent's fourth call")
        )
        async with ScriptedModelServer(script) as server:
            coder, run = coder_and_run(parts.inputs(Role.CODER, server, limits=RunLimits(model_calls=3)))
            result = await coder.ainvoke({"messages": []}, run_config(parts.thread_id), context=run)

        assert len(server.requests) == 3
        assert _answers(result["messages"])["task"] == "The workspace is empty."
        assert stop_reason(result["messages"]) is StopReason.STEP_LIMIT
        saved = await coder.aget_state(run_config(parts.thread_id))
        assert saved.values["model_calls"] == 3

    async def test_a_subagent_stops_where_the_runs_budget_ends(self, parts: Parts) -> None:
        script = (
            Script()
            .tool_call("task", description="List the workspace.", subagent_type="general-purpose")
            .tool_call("ls", path="/")
            .reply("unreachable: the subagent's second call")
        )
        async with ScriptedModelServer(script) as server:
            coder, run = coder_and_run(parts.inputs(Role.CODER, server, limits=RunLimits(model_calls=2)))
            result = await coder.ainvoke({"messages": []}, run_config(parts.thread_id), context=run)

        assert len(server.requests) == 2
        assert "step limit" in _answers(result["messages"])["task"]
        assert stop_reason(result["messages"]) is StopReason.STEP_LIMIT


class TestSharedCircuitBreaker:
    async def test_sandbox_failures_in_a_subagent_stop_the_run(
        self, parts: Parts, local_provider: LocalProvider
    ) -> None:
        await local_provider.delete(parts.sandbox.handle.id)
        notifier = RecordingNotifier()
        script = (
            Script()
            .tool_call("task", description="List the workspace.", subagent_type="general-purpose")
            .tool_call("ls", path="/")
            .reply("unreachable: the subagent after the failure")
            .reply("unreachable: the agent after the failure")
        )
        async with ScriptedModelServer(script) as server:
            inputs = parts.inputs(Role.CODER, server, limits=RunLimits(sandbox_failures=1), notifier=notifier)
            coder, run = coder_and_run(inputs)
            result = await coder.ainvoke({"messages": []}, run_config(parts.thread_id), context=run)

        assert len(server.requests) == 2
        assert stop_reason(result["messages"]) is StopReason.SANDBOX_FAILURES
        assert "sandbox failed 1 times" in _answers(result["messages"])["task"]
        assert len(notifier.notices) == 1


class TestCoderPlan:
    async def test_an_empty_reply_with_open_todos_continues_with_the_next_item(self, parts: Parts) -> None:
        todos = [
            {"content": "reproduce the bug", "status": "completed"},
            {"content": "write the fix", "status": "in_progress"},
        ]
        script = Script().tool_call("write_todos", todos=todos).empty().reply("Fixed.")
        async with ScriptedModelServer(script) as server:
            coder, run = coder_and_run(parts.inputs(Role.CODER, server))
            result = await coder.ainvoke({"messages": []}, run_config(parts.thread_id), context=run)

        assert "write_todos" in server.requests[0].tool_names
        nudge = _answers(result["messages"])[CONTINUE]
        assert "The next open item is: write the fix." in nudge
        assert "The next open item is: write the fix." in server.requests[2].texts("tool")[-1]
        assert result["messages"][-1].text == "Fixed."
