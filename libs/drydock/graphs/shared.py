"""One compiled agent graph per role and model, shared by every run of a worker process.

Compiling a deep agent is framework work (schemas, signatures, the tool node, the state graph):
about 10 ms of CPU and 300 KiB that a run held from its start to its end, built anew for every
run although two runs of a role differ only in the objects they act on. So the graph is
compiled once per (role, model, fallback model, checkpointer) and each run brings its own objects in
LangGraph's runtime context (``astream(..., context=RunContext(...))``):

- **middleware**: the role's list is built per run as before (each step bound to the run's
  thread, inbox, budget, breaker, redactor...); the shared graph holds a stand-in at each
  position (:func:`run_bound`) that overrides the same hooks and hands every call to the run's
  instance at that position;
- **tools**: the run's tools, found by name (:class:`RunTools`): the model is offered the run's
  tools and a tool call runs the run's tool. The shared graph's own copies
  (:func:`placeholder_tools`) refuse to run: nothing of one run is kept in the shared graph;
- **the sandbox** the framework's file and shell tools use (:class:`RunBackend`);
- **the model client and the system prompt** of each request (:class:`RunRequest`): the
  shared graph's own client only shaped the graph (the summarization's thresholds), so a run's
  requests go through the run's client even where two clients differ in what their settings'
  dump leaves out (an API key, an HTTP client);
- the coder's **subagent** (:class:`RunSubagent`).

A stand-in without its run's context raises :class:`MissingRunContext` instead of acting.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from deepagents.backends.protocol import (
    BackendProtocol,
    DeleteResult,
    EditResult,
    ExecuteResponse,
    FileDownloadResponse,
    FileUploadResponse,
    GlobResult,
    GrepResult,
    LsResult,
    ReadResult,
    SandboxBackendProtocol,
    WriteResult,
)
from langchain.agents.factory import _chain_async_model_call_handlers, _chain_async_tool_call_wrappers
from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.tools import ToolRuntime
from langchain.tools.tool_node import ToolCallRequest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime, get_runtime
from langgraph.types import Command
from langsmith.utils import tracing_is_enabled

Graph = CompiledStateGraph[Any, Any, Any, Any]

HOOKS = (
    "before_agent",
    "abefore_agent",
    "before_model",
    "abefore_model",
    "after_model",
    "aafter_model",
    "after_agent",
    "aafter_agent",
    "wrap_model_call",
    "awrap_model_call",
    "wrap_tool_call",
    "awrap_tool_call",
)
"""The middleware hooks ``create_agent`` builds the graph from (a node or a wrapper each)."""
SHARED_GRAPHS = 16
"""Compiled graphs a worker process keeps (one per role, model and fallback model in use)."""


class MissingRunContext(RuntimeError):
    """A shared graph ran without its run's :class:`RunContext`."""


@dataclass(frozen=True)
class RunContext:
    """What one run of a shared graph acts with: LangGraph's runtime context of the run."""

    middleware: Sequence[AgentMiddleware[Any, Any, Any]]
    """The run's middleware, in the positions of the shared graph's stand-ins."""
    tools: Sequence[BaseTool]
    """The run's own tools (the framework's come with the middleware or the backend)."""
    model: BaseChatModel
    """The run's model client."""
    backend: SandboxBackendProtocol
    system_prompt: str
    subagent: Runnable[Any, Any] | None = None
    routes: Mapping[str, BackendProtocol] = field(default_factory=dict)
    """The run's own read-only routes beside the sandbox (the analyzer's evidence), by route."""
    by_name: Mapping[str, BaseTool] = field(init=False)
    """The run's tools and its middleware's tools, by name."""

    def __post_init__(self) -> None:
        tools = {tool.name: tool for step in self.middleware for tool in getattr(step, "tools", ())}
        tools.update((tool.name, tool) for tool in self.tools)
        object.__setattr__(self, "by_name", tools)


def run_context(runtime: Runtime[Any] | ToolRuntime[Any, Any] | None) -> RunContext:
    """The run's context from ``runtime``; :class:`MissingRunContext` without one."""
    context = runtime.context if runtime is not None else None
    if not isinstance(context, RunContext):
        raise MissingRunContext(
            "a shared Drydock graph runs only with its run's context: astream(..., context=RunContext(...))"
        )
    return context


def current_context() -> RunContext:
    """The context of the run whose graph step is executing now."""
    try:
        runtime = get_runtime()
    except RuntimeError:
        runtime = None
    return run_context(runtime)


class RunBound(AgentMiddleware[AgentState[Any], Any, Any]):
    """Stands in the shared graph for the run's middleware at one position (see :func:`run_bound`)."""

    kind: type[AgentMiddleware[Any, Any, Any]]

    def __init__(self, template: AgentMiddleware[Any, Any, Any], position: int) -> None:
        super().__init__()
        self.position = position
        self._name = template.name
        self.tools = list(getattr(template, "tools", ()))
        if getattr(template, "state_schema", None) is not None:
            self.state_schema = template.state_schema

    @property
    def name(self) -> str:
        return self._name

    def step(self, runtime: Runtime[Any] | ToolRuntime[Any, Any] | None) -> AgentMiddleware[Any, Any, Any]:
        """The run's middleware at this position."""
        step = run_context(runtime).middleware[self.position]
        if type(step) is not self.kind:
            raise MissingRunContext(
                f"the run's middleware at position {self.position} is {type(step).__name__}, "
                f"not the {self.kind.__name__} the shared graph was built with"
            )
        return step


def _delegate(hook: str, original: Callable[..., Any]) -> Callable[..., Any]:
    wraps = hook.endswith(("wrap_model_call", "wrap_tool_call"))

    def delegate(self: RunBound, *args: Any, **kwargs: Any) -> Any:
        # The framework passes a node hook's runtime by keyword, a wrapper's request by position.
        runtime = args[0].runtime if wraps else kwargs["runtime"] if "runtime" in kwargs else args[1]
        return getattr(self.step(runtime), hook)(*args, **kwargs)

    # The framework reads a hook's signature (what it may be passed) and its jump targets.
    delegate.__signature__ = inspect.signature(original)  # type: ignore[attr-defined]
    delegate.__name__ = hook
    if hasattr(original, "__can_jump_to__"):
        delegate.__can_jump_to__ = original.__can_jump_to__  # type: ignore[attr-defined]
    return delegate


_STAND_INS: dict[type[AgentMiddleware[Any, Any, Any]], type[RunBound]] = {}


def _stand_in(kind: type[AgentMiddleware[Any, Any, Any]]) -> type[RunBound]:
    known = _STAND_INS.get(kind)
    if known is None:
        hooks = {
            hook: _delegate(hook, getattr(kind, hook))
            for hook in HOOKS
            if getattr(kind, hook) is not getattr(AgentMiddleware, hook)
        }
        known = _STAND_INS[kind] = cast(
            type[RunBound], type(f"RunBound{kind.__name__}", (RunBound,), {"kind": kind, **hooks})
        )
    return known


def run_bound(middleware: Sequence[AgentMiddleware[Any, Any, Any]]) -> list[AgentMiddleware[Any, Any, Any]]:
    """Stand-ins for ``middleware`` (a run's list): each overrides the hooks its step overrides,
    under its name, with its tools and state schema, and hands each call to the step at its
    position in the running run's list."""
    return [_stand_in(type(step))(step, position) for position, step in enumerate(middleware)]


def shared_stack(middleware: Sequence[AgentMiddleware[Any, Any, Any]]) -> list[AgentMiddleware[Any, Any, Any]]:
    """A shared graph's middleware for a run's list: :class:`RunTools`, :class:`RunRequest`, then
    the run's stand-ins (:func:`run_bound`), their wrappers folded (:func:`fold_wrappers`)."""
    return fold_wrappers([RunTools(), RunRequest(), *run_bound(middleware)])


WRAPS = ("wrap_model_call", "awrap_model_call", "wrap_tool_call", "awrap_tool_call")


def _overrides(step: AgentMiddleware[Any, Any, Any], hook: str) -> bool:
    return getattr(type(step), hook) is not getattr(AgentMiddleware, hook)


FRAMEWORK_PACKAGES = ("langchain", "langgraph", "deepagents")


def _foldable(step: AgentMiddleware[Any, Any, Any]) -> bool:
    """Whether ``step`` is none of the framework's, under its own class's name, with
    asynchronous wrappers only. The framework puts a middleware named as one of its own in that
    one's place (the provider edge, the summarization), so only such a step surely stays beside
    its neighbours in the list."""
    kind = step.kind if isinstance(step, RunBound) else type(step)
    return (
        not kind.__module__.startswith(FRAMEWORK_PACKAGES)
        and step.name == kind.__name__
        and not _overrides(step, "wrap_model_call")
        and not _overrides(step, "wrap_tool_call")
    )


def fold_wrappers(stack: Sequence[AgentMiddleware[Any, Any, Any]]) -> list[AgentMiddleware[Any, Any, Any]]:
    """``stack`` with the model and tool call wrappers of each run of adjacent foldable steps
    (:func:`_foldable`) chained by the first of them, in the same order, the others keeping
    their names, node hooks, tools and state schemas (and losing only their wrappers).

    ``create_agent`` wraps every middleware's ``awrap_model_call`` and ``awrap_tool_call`` in
    LangSmith's ``traceable``, whose bookkeeping costs tens of microseconds per call even with
    tracing off: the coder's steps of ours in a row (ten model call wrappers, six tool call
    wrappers) cost about 0.3 ms of the worker's CPU per agent step. The chain is the
    framework's own composition (the same order, the same state updates). With tracing on
    nothing is folded, so that each step keeps its span."""
    if tracing_is_enabled():
        return list(stack)
    folded: list[AgentMiddleware[Any, Any, Any]] = []
    group: list[AgentMiddleware[Any, Any, Any]] = []
    for step in [*stack, None]:
        if step is not None and _foldable(step):
            group.append(step)
            continue
        if len(group) > 1:
            folded += [_chaining(group), *(_without_wrappers(member) for member in group[1:])]
        else:
            folded += group
        group = []
        if step is not None:
            folded.append(step)
    return folded


def _copy_as(step: AgentMiddleware[Any, Any, Any], kind: type[Any]) -> AgentMiddleware[Any, Any, Any]:
    copy: AgentMiddleware[Any, Any, Any] = object.__new__(kind)
    copy.__dict__.update(step.__dict__)
    return copy


def _without_wrappers(step: AgentMiddleware[Any, Any, Any]) -> AgentMiddleware[Any, Any, Any]:
    kind = type(step)
    bare = type(kind.__name__, (kind,), {hook: getattr(AgentMiddleware, hook) for hook in WRAPS})
    return _copy_as(step, bare)


def _chaining(group: Sequence[AgentMiddleware[Any, Any, Any]]) -> AgentMiddleware[Any, Any, Any]:
    """The first of ``group``, running the model and tool call wrappers of the whole group."""
    model_chain = _chain_async_model_call_handlers(
        [step.awrap_model_call for step in group if _overrides(step, "awrap_model_call")]
    )
    tool_chain = _chain_async_tool_call_wrappers(
        [step.awrap_tool_call for step in group if _overrides(step, "awrap_tool_call")]
    )
    hooks: dict[str, Any] = {}
    if model_chain is not None:

        async def awrap_model_call(
            self: AgentMiddleware[Any, Any, Any],
            request: ModelRequest[Any],
            handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
        ) -> Any:
            return await model_chain(request, handler)

        hooks["awrap_model_call"] = awrap_model_call
    if tool_chain is not None:

        async def awrap_tool_call(
            self: AgentMiddleware[Any, Any, Any],
            request: ToolCallRequest,
            handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
        ) -> ToolMessage | Command[Any]:
            return await tool_chain(request, handler)

        hooks["awrap_tool_call"] = awrap_tool_call
    head = group[0]
    kind = type(head)
    return _copy_as(head, type(kind.__name__, (kind,), hooks))


async def _dispatched_per_run(**_: Any) -> str:
    raise MissingRunContext("a shared graph's tool runs only as the run's own tool")


def placeholder_tools(tools: Sequence[BaseTool]) -> list[BaseTool]:
    """Copies of ``tools`` for a shared graph: the same name, description and arguments (what
    the model is offered and the tool node validates), but no run behind them."""
    copies: list[BaseTool] = []
    for tool in tools:
        if not isinstance(tool, StructuredTool):
            raise TypeError(f"tool {tool.name} is a {type(tool).__name__}; a shared graph copies StructuredTools")
        copies.append(tool.model_copy(update={"func": None, "coroutine": _dispatched_per_run}))
    return copies


class RunTools(AgentMiddleware[AgentState[Any], Any, Any]):
    """Offers the model the run's tools and runs the run's tool for each call, by name."""

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        by_name = run_context(request.runtime).by_name
        tools = [by_name.get(tool.name, tool) if isinstance(tool, BaseTool) else tool for tool in request.tools]
        return await handler(request.override(tools=tools))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        tool = run_context(request.runtime).by_name.get(request.tool_call["name"])
        return await handler(request.override(tool=tool) if tool is not None else request)


class RunRequest(AgentMiddleware[AgentState[Any], Any, Any]):
    """Sends each model request through the run's model client, with the run's system prompt
    first, where a graph built for the run has it."""

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        run = run_context(request.runtime)
        prompt = run.system_prompt
        added = request.system_message.content_blocks if request.system_message is not None else []
        if not added:
            return await handler(request.override(model=run.model, system_message=SystemMessage(content=prompt)))
        blocks: list[Any] = [{"type": "text", "text": prompt}]
        for block in added:
            if len(blocks) == 1 and block["type"] == "text":
                # The framework's parts follow the prompt as they follow a prompt given at build.
                blocks.append({**block, "text": "\n\n" + block["text"].removeprefix("\n\n")})
            else:
                blocks.append(block)
        return await handler(request.override(model=run.model, system_message=SystemMessage(content_blocks=blocks)))


class RunSubagent(Runnable[Any, Any]):
    """A subagent slot of a shared graph: runs the running run's subagent."""

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        raise MissingRunContext("Drydock runs its agents asynchronously")

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        subagent = current_context().subagent
        if subagent is None:
            raise MissingRunContext("the run has no subagent")
        return await subagent.ainvoke(input, config, **kwargs)


class RunBackend(SandboxBackendProtocol):
    """The framework's backend in a shared graph: the running run's sandbox, or with ``route``
    the run's backend for that route of a composite backend."""

    def __init__(self, route: str | None = None) -> None:
        self.route = route

    def _backend(self) -> SandboxBackendProtocol:
        context = current_context()
        if self.route is None:
            return context.backend
        # A route serves files only: the composite runs commands in its default backend.
        return cast(SandboxBackendProtocol, context.routes[self.route])

    @property
    def id(self) -> str:
        return self._backend().id

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        return self._backend().execute(command, timeout=timeout)

    async def aexecute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:  # noqa: ASYNC109
        return await self._backend().aexecute(command, timeout=timeout)

    def ls(self, path: str) -> LsResult:
        return self._backend().ls(path)

    async def als(self, path: str) -> LsResult:
        return await self._backend().als(path)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        return self._backend().read(file_path, offset, limit)

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        return await self._backend().aread(file_path, offset, limit)

    def grep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        return self._backend().grep(pattern, path, glob, max_count=max_count)

    async def agrep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        return await self._backend().agrep(pattern, path, glob, max_count=max_count)

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        return self._backend().glob(pattern, path)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        return await self._backend().aglob(pattern, path)

    def write(self, file_path: str, content: str) -> WriteResult:
        return self._backend().write(file_path, content)

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        return await self._backend().awrite(file_path, content)

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        return self._backend().edit(file_path, old_string, new_string, replace_all)

    async def aedit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        return await self._backend().aedit(file_path, old_string, new_string, replace_all)

    def delete(self, file_path: str) -> DeleteResult:
        return self._backend().delete(file_path)

    async def adelete(self, file_path: str) -> DeleteResult:
        return await self._backend().adelete(file_path)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        return self._backend().upload_files(files)

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        return await self._backend().aupload_files(files)

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return self._backend().download_files(paths)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return await self._backend().adownload_files(paths)


def model_key(model: BaseChatModel | None) -> str | None:
    """What two runs' model clients must agree on to share a graph: every setting that shapes
    a request (the client's callbacks, cache and tags excepted)."""
    if model is None:
        return None
    return model.model_dump_json(
        exclude={"callbacks", "callback_manager", "cache", "metadata", "tags"},
        # A setting that is a live object (an HTTP client, say) counts by its identity.
        fallback=lambda value: f"{type(value).__qualname__}@{id(value)}",
    )


class SharedGraphs:
    """The compiled graphs of a worker process, by key, the least recently used dropped first."""

    def __init__(self, size: int = SHARED_GRAPHS) -> None:
        self.size = size
        self._graphs: OrderedDict[Hashable, Graph] = OrderedDict()

    def get(self, key: Hashable, build: Callable[[], Graph]) -> Graph:
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._graphs[key] = build()
            while len(self._graphs) > self.size:
                self._graphs.popitem(last=False)
        self._graphs.move_to_end(key)
        return graph

    def of(
        self,
        role: str,
        model: BaseChatModel,
        fallback: BaseChatModel | None,
        checkpointer: object,
        build: Callable[[], Graph],
    ) -> Graph:
        """The graph of ``role`` for runs with ``model``, ``fallback`` and ``checkpointer``."""
        # The graph keeps its checkpointer, so the id names that checkpointer while it is cached.
        return self.get((role, model_key(model), model_key(fallback), id(checkpointer)), build)


GRAPHS = SharedGraphs()
"""The process's shared graphs."""
