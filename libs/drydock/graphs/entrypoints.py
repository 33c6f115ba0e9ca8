"""The graph factories ``langgraph.json`` names, in the form LangGraph's CLI and server call:
a function of the run's ``RunnableConfig`` that returns the compiled graph.

Drydock's per-run inputs (the sandbox, the model, the tools, the channel adapters) are live
objects, so they travel in the config's ``configurable`` under :data:`INPUTS_KEY`; the worker
puts them there (:func:`with_inputs`) and the factory takes them out. Each role's module is
imported only when its factory is called, so a worker loads only its own role's graph.

Every role's graph is shared by the runs of a process (:mod:`drydock.graphs.shared`): its
factory returns the graph compiled for the run's model, and :func:`run_context` what the run
brings to it, which the worker passes as LangGraph's runtime context.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from drydock.graphs.inputs import AgentInputs
from drydock.graphs.shared import RunContext

INPUTS_KEY = "drydock_inputs"
"""Where a run's :class:`~drydock.graphs.inputs.AgentInputs` sit in ``config["configurable"]``."""

Graph = CompiledStateGraph[Any, Any, Any, Any]


class MissingInputs(ValueError):
    """The config carries no Drydock inputs: the graph is built per run by a Drydock worker."""


def with_inputs(config: RunnableConfig, inputs: AgentInputs) -> RunnableConfig:
    """A copy of ``config`` whose ``configurable`` carries ``inputs`` for a graph factory."""
    return {**config, "configurable": {**(config.get("configurable") or {}), INPUTS_KEY: inputs}}


def inputs_of(config: RunnableConfig) -> AgentInputs:
    """The run's inputs from ``config``; :class:`MissingInputs` says what is missing."""
    found = (config.get("configurable") or {}).get(INPUTS_KEY)
    if not isinstance(found, AgentInputs):
        raise MissingInputs(
            f"a Drydock graph is built for one thread run: config['configurable'][{INPUTS_KEY!r}] must hold "
            f"the run's AgentInputs (a Drydock worker sets it), not {type(found).__name__}"
        )
    return found


def run_context(graph: str, config: RunnableConfig) -> RunContext | None:
    """What the run ``config`` describes brings to graph ``graph`` (None: a graph of another
    manifest, built per run)."""
    if graph == "coder":
        from drydock.graphs.coder import coder_run

        return coder_run(inputs_of(config))
    if graph == "reviewer":
        from drydock.graphs.reviewer import reviewer_run

        return reviewer_run(inputs_of(config))
    if graph == "analyzer":
        from drydock.graphs.analyzer import analyzer_run

        return analyzer_run(inputs_of(config))
    return None


def coder(config: RunnableConfig) -> Graph:
    """The ``coder`` graph for the run ``config`` describes: the process's graph for its model
    and fallback model, compiled at the first run that needs it."""
    from drydock.graphs.coder import coder_graph

    return coder_graph(inputs_of(config))


def reviewer(config: RunnableConfig) -> Graph:
    """The ``reviewer`` graph for the run ``config`` describes."""
    from drydock.graphs.reviewer import reviewer_graph

    return reviewer_graph(inputs_of(config))


def analyzer(config: RunnableConfig) -> Graph:
    """The ``analyzer`` graph for the run ``config`` describes."""
    from drydock.graphs.analyzer import analyzer_graph

    return analyzer_graph(inputs_of(config))
