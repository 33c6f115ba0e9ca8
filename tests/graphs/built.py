"""Reading a built agent: what its compiled graph calls, not what its factory was given."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

import deepagents.graph
import langchain.agents
import pytest
from langchain.agents.middleware import AgentMiddleware
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode

import drydock.graphs.subagents
from drydock.graphs.coder import coder_graph, coder_run
from drydock.graphs.inputs import AgentInputs
from drydock.graphs.shared import RunContext, RunSubagent
from drydock.graphs.subagents import BuiltAtFirstCall

Graph = CompiledStateGraph[Any, Any, Any, Any]


def _cells(function: Callable[..., Any]) -> dict[str, Any]:
    return dict(zip(function.__code__.co_freevars, (c.cell_contents for c in function.__closure__ or ()), strict=True))


def model_call_chain(graph: Graph) -> list[AgentMiddleware[Any, Any, Any]]:
    """The middleware whose ``awrap_model_call`` the compiled model node runs, outermost first:
    the last one makes the last change to a request before the provider."""
    model_node = cast(Any, graph.nodes["model"].bound).afunc

    def walk(handler: Any) -> list[AgentMiddleware[Any, Any, Any]]:
        cells = _cells(handler) if hasattr(handler, "__code__") else {}
        if handler.__name__ == "composed":
            return walk(cells["outer"]) + walk(cells["inner"])
        if handler.__name__ == "normalized_single":
            return walk(cells["single_handler"])
        method = getattr(handler, "__wrapped__", handler)
        return [method.__self__]

    return walk(_cells(model_node)["awrap_model_call_handler"])


def tool_names(graph: Graph) -> list[str]:
    """The tools the compiled graph's tool node can run."""
    node = cast(ToolNode, graph.nodes["tools"].bound)
    return list(node.tools_by_name)


def subagent(graph: Graph, name: str, run: RunContext | None = None) -> Graph:
    """The compiled subagent that ``graph``'s ``task`` tool runs for ``name`` (in ``run``, for a
    shared graph)."""
    task = cast(Any, graph.nodes["tools"].bound).tools_by_name["task"]
    runnable = _cells(task.coroutine)["subagent_graphs"][name]
    runnable = getattr(runnable, "bound", runnable)
    if isinstance(runnable, RunSubagent):
        assert run is not None, "a shared graph's subagent is its run's"
        assert run.subagent is not None
        runnable = run.subagent
    if isinstance(runnable, BuiltAtFirstCall):
        runnable = runnable.built
    return cast(Graph, runnable)


class Stacks:
    """The whole middleware list each agent was compiled with, by agent name, as the framework
    assembled it (recorded at ``create_agent``, which both deepagents and Drydock call)."""

    def __init__(self) -> None:
        self.by_agent: dict[str, list[AgentMiddleware[Any, Any, Any]]] = {}

    def names(self, agent: str) -> list[str]:
        return [m.name for m in self.by_agent[agent]]


@contextmanager
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stacks]:
    """Records the middleware of every agent built inside the block."""
    stacks = Stacks()
    real = langchain.agents.create_agent

    def create_agent(*args: Any, **kwargs: Any) -> Any:
        stacks.by_agent[str(kwargs.get("name"))] = list(kwargs.get("middleware", ()))
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(deepagents.graph, "create_agent", create_agent)
        patch.setattr(drydock.graphs.subagents, "create_agent", create_agent)
        yield stacks


def coder_and_run(inputs: AgentInputs) -> tuple[Graph, RunContext]:
    """The shared coder graph for ``inputs`` and what their run brings to it (``context=``)."""
    return coder_graph(inputs), coder_run(inputs)
