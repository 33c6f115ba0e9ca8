"""The ``analyzer`` graph (named in ``langgraph.json``): a deep agent that reads its procedures
(skills) and its evidence as virtual read-only files and saves a repository's review guidelines.

Its backend is the sandbox (the repository at its default branch) with two read-only routes
beside it: ``/skills/`` (the package's skills) and ``/analysis/`` (this run's evidence). Neither
is ever written into the sandbox, and both refuse writes. Of the framework's tools it keeps the
reading ones (no shell, no ``task``: :mod:`drydock.graphs.subagents`, the analyzer has no
subagent); its only own tool is ``save_guidelines``.

The graph is compiled once per model and shared by the process's runs
(:mod:`drydock.graphs.shared`): its backend hands the sandbox and the evidence route to the
running run's (:func:`analyzer_run`), while the skills route is the same for every run.
"""

from __future__ import annotations

from typing import Any

from deepagents import create_deep_agent
from deepagents.middleware.filesystem import FilesystemMiddleware
from deepagents.middleware.skills import SkillsMiddleware, SkillsState, SkillsStateUpdate
from langchain.agents.middleware import AgentMiddleware
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from drydock.graphs.analyzer_prompt import EVIDENCE_FILE, EVIDENCE_ROUTE, analyzer_prompt
from drydock.graphs.inputs import AgentInputs
from drydock.graphs.shared import GRAPHS, RunBackend, RunContext, placeholder_tools, shared_stack
from drydock.graphs.subagents import NoSubagents
from drydock.graphs.token_count import summarization
from drydock.graphs.turn_state import InboxTurnState
from drydock.middleware import analyzer_middleware, at_the_provider_edge
from drydock.review.checkouts import AnalysisCheckout
from drydock.skills import SKILLS_ROUTE, ReadOnlyFiles, skill_files, with_read_only_routes

READ_TOOLS: list[Any] = ["ls", "read_file", "glob", "grep"]
"""The framework's tools the analyzer gets: reading only, no shell."""


class FreshSkills(SkillsMiddleware):
    """Deepagents' skills middleware, reloading the skills' metadata at the start of every run
    (it keeps them in the checkpointed state otherwise), so a new version of a skill applies to
    threads that started before it was deployed. Takes the place of the default by name."""

    @property
    def name(self) -> str:
        return "SkillsMiddleware"

    async def abefore_agent(  # type: ignore[override]
        self, state: SkillsState, runtime: Runtime, config: RunnableConfig
    ) -> SkillsStateUpdate | None:
        return await super().abefore_agent({**state, "skills_metadata": None}, runtime, config)


def evidence_files(checkout: AnalysisCheckout | None) -> ReadOnlyFiles:
    """The run's evidence as ``/evidence.json`` (routed at ``/analysis/``)."""
    if checkout is None or checkout.evidence is None:
        return ReadOnlyFiles({})
    name = EVIDENCE_FILE.removeprefix(EVIDENCE_ROUTE.rstrip("/"))
    return ReadOnlyFiles({name: checkout.evidence.model_dump_json(indent=1, exclude={"until"})})


def analyzer_run(inputs: AgentInputs) -> RunContext:
    """What one run of ``inputs.scope.thread_id`` brings to the shared analyzer graph: its steps,
    its sandbox and its evidence (the route the shared graph's backend hands to it)."""
    checkout = inputs.checkout if isinstance(inputs.checkout, AnalysisCheckout) else None
    evidence = evidence_files(checkout)
    backend = with_read_only_routes(inputs.backend, {SKILLS_ROUTE: skill_files(), EVIDENCE_ROUTE: evidence})
    steps = at_the_provider_edge(
        analyzer_middleware(
            thread_id=inputs.scope.thread_id,
            limits=inputs.limits,
            usage=inputs.usage,
            redactor=inputs.redactor,
            spend=inputs.spend,
        )
    )
    return RunContext(
        model=inputs.model,
        middleware=[*steps, summarization(inputs.model, backend)],
        tools=inputs.tools,
        backend=inputs.backend,
        system_prompt=analyzer_prompt(inputs.scope, inputs.checkout),
        routes={EVIDENCE_ROUTE: evidence},
    )


def analyzer_graph(inputs: AgentInputs) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The process's analyzer graph for ``inputs``' model and checkpointer, compiled at the first
    run that needs it."""
    return GRAPHS.of(
        "analyzer", inputs.model, None, inputs.checkpointer, lambda: shared_analyzer(inputs, analyzer_run(inputs))
    )


def shared_analyzer(inputs: AgentInputs, run: RunContext) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The analyzer graph for ``inputs``' model, shaped after ``run``; it keeps nothing of that run."""
    backend = with_read_only_routes(
        RunBackend(), {SKILLS_ROUTE: skill_files(), EVIDENCE_ROUTE: RunBackend(route=EVIDENCE_ROUTE)}
    )
    middleware: list[AgentMiddleware[Any, Any, Any]] = [
        FilesystemMiddleware(backend=backend, tools=READ_TOOLS),
        NoSubagents(),
        FreshSkills(backend=backend, sources=[SKILLS_ROUTE]),
        *shared_stack(run.middleware),
    ]
    return create_deep_agent(
        inputs.model,
        placeholder_tools(run.tools),
        middleware=middleware,
        backend=backend,
        checkpointer=inputs.checkpointer,
        state_schema=InboxTurnState,
        name="analyzer",
    )
