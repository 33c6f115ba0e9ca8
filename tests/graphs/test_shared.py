"""Each role's graph shared by a worker's runs (:mod:`drydock.graphs.shared`): a run on one sends
the model exactly what a graph built for that run sends, each of two concurrent runs acts in its
own sandbox for its own thread, and nothing runs without its run's context."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Awaitable, Callable
from typing import Any, NotRequired, cast

import pytest
from deepagents import create_deep_agent
from deepagents.middleware.filesystem import FilesystemMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain.tools.tool_node import ToolCallRequest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.types import Command
from langsmith import tracing_context
from pydantic import SecretStr

from drydock.config import ModelSettings
from drydock.graphs.analyzer import FreshSkills, analyzer_graph, analyzer_run
from drydock.graphs.analyzer_prompt import EVIDENCE_FILE, EVIDENCE_ROUTE
from drydock.graphs.coder import coder_graph, coder_run
from drydock.graphs.inputs import AgentInputs
from drydock.graphs.reviewer import READ_TOOLS, reviewer_graph, reviewer_run
from drydock.graphs.shared import MissingRunContext, RunContext, fold_wrappers, model_key
from drydock.graphs.subagents import NoSubagents, general_purpose
from drydock.graphs.turn_state import InboxTurnState
from drydock.models import Models
from drydock.roles import Role
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.providers.local import LocalProvider
from drydock.skills import SKILLS_ROUTE, skill_files, with_read_only_routes
from tests.fakes.openai_server import ReceivedRequest, Script, ScriptedModelServer
from tests.graphs.built import Graph, model_call_chain
from tests.graphs.conftest import Parts
from tests.middleware.conftest import chat_model, run_config

Build = Callable[[AgentInputs], Graph]
BuildForRun = Callable[[AgentInputs, RunContext], Graph]


def _without_ids(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "messages": [{k: v for k, v in m.items() if k != "id"} for m in body["messages"]]}


async def _sent_both_ways(
    parts: Parts,
    role: Role,
    script: Callable[[], Script],
    run_of: Callable[[AgentInputs], RunContext],
    shared: Build,
    built_for_run: BuildForRun,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The requests of one turn on a graph built for the run, then of the same turn on the shared graph."""
    sent: list[list[dict[str, Any]]] = []
    for on_shared in (False, True):
        async with ScriptedModelServer(script()) as server:
            inputs = parts.inputs(role, server)
            run = run_of(inputs)
            config = run_config(f"{parts.thread_id}-{on_shared}")
            turn: Any = {"messages": [HumanMessage("go on")]}
            if on_shared:
                await shared(inputs).ainvoke(turn, config, context=run)
            else:
                await built_for_run(inputs, run).ainvoke(turn, config)
            sent.append([_without_ids(request.body) for request in server.requests])
    return sent[0], sent[1]


def _read_only(backend: Any) -> AgentMiddleware[Any, Any, Any]:
    return cast(AgentMiddleware[Any, Any, Any], FilesystemMiddleware(backend=backend, tools=READ_TOOLS))


def _coder_for_run(inputs: AgentInputs, run: RunContext) -> Graph:
    return create_deep_agent(
        inputs.model,
        inputs.tools,
        system_prompt=run.system_prompt,
        middleware=list(run.middleware),
        subagents=[general_purpose(run.subagent)] if run.subagent is not None else [],
        backend=inputs.backend,
        checkpointer=inputs.checkpointer,
        name="coder",
    )


def _reviewer_for_run(inputs: AgentInputs, run: RunContext) -> Graph:
    return create_deep_agent(
        inputs.model,
        run.tools,
        system_prompt=run.system_prompt,
        middleware=[_read_only(inputs.backend), NoSubagents(), *run.middleware],
        backend=inputs.backend,
        checkpointer=inputs.checkpointer,
        state_schema=InboxTurnState,
        name="reviewer",
    )


def _analyzer_for_run(inputs: AgentInputs, run: RunContext) -> Graph:
    routes = {SKILLS_ROUTE: skill_files(), EVIDENCE_ROUTE: run.routes[EVIDENCE_ROUTE]}
    backend = with_read_only_routes(inputs.backend, routes)
    return create_deep_agent(
        inputs.model,
        run.tools,
        system_prompt=run.system_prompt,
        middleware=[
            _read_only(backend),
            NoSubagents(),
            FreshSkills(backend=backend, sources=[SKILLS_ROUTE]),
            *run.middleware,
        ],
        backend=backend,
        checkpointer=inputs.checkpointer,
        state_schema=InboxTurnState,
        name="analyzer",
    )


class TestASharedGraphSendsWhatAGraphBuiltForTheRunSends:
    async def test_the_coder(self, parts: Parts) -> None:
        def script() -> Script:
            return (
                Script()
                .tool_call("write_todos", todos=[{"content": "look around", "status": "in_progress"}])
                .tool_call("ls", path="/")
                .tool_call("report_confidence", confidence=0.5, diagnosis="a guess")
                .reply("done")
            )

        per_run, shared = await _sent_both_ways(parts, Role.CODER, script, coder_run, coder_graph, _coder_for_run)
        assert len(per_run) == 4
        assert shared == per_run

    async def test_the_reviewer(self, parts: Parts) -> None:
        def script() -> Script:
            return Script().tool_call("ls", path="/").tool_call("git", command="log", args=["--oneline"]).reply("Fine.")

        per_run, shared = await _sent_both_ways(
            parts, Role.REVIEWER, script, reviewer_run, reviewer_graph, _reviewer_for_run
        )
        assert len(per_run) == 3
        assert shared == per_run

    async def test_the_analyzer(self, parts: Parts) -> None:
        def script() -> Script:
            return (
                Script()
                .tool_call("ls", path="/skills/")
                .tool_call("read_file", file_path=EVIDENCE_FILE)
                .tool_call("ls", path="/")
                .reply("Nothing to save.")
            )

        per_run, shared = await _sent_both_ways(
            parts, Role.ANALYZER, script, analyzer_run, analyzer_graph, _analyzer_for_run
        )
        assert len(per_run) == 4
        assert shared == per_run


class TestTheSharedCoder:
    async def test_runs_with_the_same_model_share_one_graph(self, parts: Parts) -> None:
        async with ScriptedModelServer() as server:
            first = coder_graph(parts.inputs(Role.CODER, server))
            assert coder_graph(parts.inputs(Role.CODER, server)) is first
            other = coder_graph(parts.inputs(Role.CODER, server, model=chat_model(server, "gpt-5-mini")))
        assert other is not first

    async def test_two_concurrent_runs_each_act_in_their_own_sandbox(
        self, parts: Parts, local_provider: LocalProvider
    ) -> None:
        def respond(request: ReceivedRequest) -> Script:
            if any(message.get("role") == "tool" for message in request.messages):
                return Script().reply("done")
            token = request.texts("user")[-1]
            return Script().tool_call("execute", command=f"echo {shlex.quote(token)} > ~/marker")

        other = SandboxBackend(await local_provider.create("other-thread"))
        try:
            async with ScriptedModelServer(responder=respond) as server:
                mine = parts.inputs(Role.CODER, server)
                theirs = parts.inputs(Role.CODER, server, backend=other)
                graph = coder_graph(mine)
                assert coder_graph(theirs) is graph
                await asyncio.gather(
                    graph.ainvoke(
                        {"messages": [HumanMessage("mine")]}, run_config("thread-mine"), context=coder_run(mine)
                    ),
                    graph.ainvoke(
                        {"messages": [HumanMessage("theirs")]}, run_config("thread-theirs"), context=coder_run(theirs)
                    ),
                )
            assert (await parts.sandbox.aexecute("cat ~/marker")).output.strip() == "mine"
            assert (await other.aexecute("cat ~/marker")).output.strip() == "theirs"
        finally:
            await other.aclose()

    async def test_without_its_run_nothing_acts(self, parts: Parts) -> None:
        async with ScriptedModelServer(Script().tool_call("execute", command="touch ~/acted")) as server:
            graph = coder_graph(parts.inputs(Role.CODER, server))
            with pytest.raises(MissingRunContext, match="runs only with its run's context"):
                await graph.ainvoke({"messages": [HumanMessage("act")]}, run_config(parts.thread_id))
        assert (await parts.sandbox.aexecute("test -e ~/acted || echo absent")).output.strip() == "absent"


class TestTheRunsOwnClient:
    def test_clients_differing_in_a_request_setting_do_not_share_a_graph(self) -> None:
        models = Models(ModelSettings(base_url="http://127.0.0.1:9/v1", api_key=SecretStr("unused")))
        first = models.chat_model(models.default)
        assert model_key(first) == model_key(first.model_copy())
        assert model_key(first.model_copy(update={"reasoning_effort": "high"})) != model_key(first)
        assert model_key(None) is None

    async def test_a_run_s_requests_go_through_its_own_client(self, parts: Parts) -> None:
        async with ScriptedModelServer(Script().reply("hello"), api_key="the-run-s-key") as server:
            shaped_by = parts.inputs(Role.CODER, server)
            graph = coder_graph(shaped_by)
            settings = ModelSettings(
                base_url=server.base_url, api_key=SecretStr("the-run-s-key"), default="gpt-5.1", max_retries=0
            )
            models = Models(settings)
            inputs = parts.inputs(Role.CODER, server, model=models.chat_model(models.default))
            assert coder_graph(inputs) is graph, "the key is not in the settings' dump"
            await graph.ainvoke(
                {"messages": [HumanMessage("hi")]}, run_config(parts.thread_id), context=coder_run(inputs)
            )
        assert len(server.requests) == 1


class _Recorded(AgentMiddleware[Any, Any, Any]):
    """Records each model and tool call it wraps, under its name, in a shared list."""

    def __init__(self, calls: list[str], *, update: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.calls = calls
        self.update = update

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        self.calls.append(f"model {self.name}")
        response = await handler(request)
        if self.update is None:
            return response
        return ExtendedModelResponse(model_response=response, command=Command(update=self.update))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        self.calls.append(f"tool {self.name}")
        return await handler(request)


class First(_Recorded):
    pass


class Second(_Recorded):
    pass


class Third(_Recorded):
    pass


class Fourth(_Recorded):
    pass


class TakesAFrameworkSlot(_Recorded):
    """Named as one of the framework's middleware, as the provider edge is."""

    @property
    def name(self) -> str:
        return "TodoListMiddleware"


class Counted(AgentState[Any]):
    counted: NotRequired[int]


class CountsInState(Second):
    state_schema = Counted


def _traced_layers(graph: Graph) -> list[str]:
    return [step.name for step in model_call_chain(graph)]


class TestFoldedWrappers:
    """Adjacent steps of ours are chained by the first of them, one traced layer instead of one
    each; every step still wraps every call, in the list's order."""

    def _stack(self, calls: list[str]) -> list[AgentMiddleware[Any, Any, Any]]:
        return [
            First(calls),
            CountsInState(calls, update={"counted": 1}),
            TakesAFrameworkSlot(calls),
            Third(calls),
            Fourth(calls),
        ]

    async def test_every_step_wraps_every_call_in_order(self) -> None:
        calls: list[str] = []
        async with ScriptedModelServer(Script().tool_call("echo", text="hi").reply("done")) as server:
            graph = create_agent(chat_model(server), [_echo], middleware=fold_wrappers(self._stack(calls)))
            result = await graph.ainvoke({"messages": [HumanMessage("go")]})

        names = ["First", "CountsInState", "TodoListMiddleware", "Third", "Fourth"]
        model_round = [f"model {name}" for name in names]
        assert calls == [*model_round, *(f"tool {name}" for name in names), *model_round]
        assert result["counted"] == 1
        assert result["messages"][-1].text == "done"

    async def test_each_run_of_adjacent_steps_is_one_traced_layer(self) -> None:
        async with ScriptedModelServer() as server:
            graph = create_agent(chat_model(server), [_echo], middleware=fold_wrappers(self._stack([])))

        assert _traced_layers(graph) == ["First", "TodoListMiddleware", "Third"]
        assert [step.name for step in fold_wrappers(self._stack([]))] == [
            "First",
            "CountsInState",
            "TodoListMiddleware",
            "Third",
            "Fourth",
        ]

    def test_nothing_is_folded_while_tracing(self) -> None:
        stack = self._stack([])
        with tracing_context(enabled=True):
            assert fold_wrappers(stack) == stack

    async def test_the_shared_coder_folds_its_steps_around_the_plan(self, parts: Parts) -> None:
        async with ScriptedModelServer() as server:
            inputs = parts.inputs(Role.CODER, server)
            graph = coder_graph(inputs)

        layers = _traced_layers(graph)
        ours = layers[layers.index("RunTools") : layers.index("AnthropicPromptCachingMiddleware")]
        assert ours == ["RunTools", "TodoListMiddleware", "SanitizeToolInputs"]


async def _echo_text(text: str) -> str:
    return text


_echo = StructuredTool.from_function(coroutine=_echo_text, name="echo", description="Echo the text.")
