"""The framework alone, the floor the agent benchmarks judge Drydock's runs by: ``create_deep_agent``
with its defaults, Drydock's model client and the tools the benchmarks' model double calls, with
the answers the pipeline's coder gives them.

``python -m bench.floor_agent COUNT WARMUP`` is the memory floor of ``bench concurrency``: a
process of its own that builds the agent once (as a worker compiles one graph per role and
model), completes ``WARMUP`` runs at once, prints ``ready``, and on a line on its standard input starts
``COUNT`` runs at once, each with a conversation of its own and no checkpointer (the framework
holding the conversation, nothing persisted), then prints ``done`` and exits at the end of its
standard input (so that its CPU time can be read first). The model settings come from
``DRYDOCK_MODELS_*``, as a worker's do.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from deepagents import create_deep_agent
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from drydock.cli import event_loop_factory
from drydock.config import Settings
from drydock.models import Models
from drydock.tools import github_comment, web_search

RECURSION_LIMIT = 1_000


def search_tool() -> StructuredTool:
    """``web_search`` as the pipeline's coder has it (no search provider): same name, schema, answer."""

    async def search(query: str, count: int = 5) -> str:
        return web_search.OFF

    return StructuredTool.from_function(
        coroutine=search, name=web_search.NAME, description="Search the web.", args_schema=web_search.WebSearchArgs
    )


def comment_tool() -> StructuredTool:
    """``github_comment`` answering as the real tool does once the comment is posted."""

    async def comment(body: str, number: int | None = None) -> dict[str, Any]:
        on = number or 1
        return {"id": 1, "number": on, "html_url": f"https://github.com/acme/widgets/issues/{on}#issuecomment-1"}

    return StructuredTool.from_function(
        coroutine=comment,
        name=github_comment.NAME,
        description=github_comment.DESCRIPTION,
        args_schema=github_comment.GithubCommentInput,
    )


def floor_agent(
    models: Models, tools: list[BaseTool], checkpointer: Checkpointer | None = None
) -> CompiledStateGraph[Any]:
    """The framework alone on the installation's default model."""
    return create_deep_agent(models.chat_model(models.default), tools, checkpointer=checkpointer)


async def run(agent: CompiledStateGraph[Any]) -> None:
    await agent.ainvoke(
        {"messages": [{"role": "user", "content": "@drydock search"}]}, {"recursion_limit": RECURSION_LIMIT}
    )


async def main(count: int, warmup: int) -> None:
    loop = asyncio.get_running_loop()
    agent = floor_agent(Models(Settings().models), [search_tool(), comment_tool()])
    await asyncio.gather(*(run(agent) for _ in range(warmup)))
    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)
    await asyncio.gather(*(run(agent) for _ in range(count)))
    print("done", flush=True)
    while await loop.run_in_executor(None, sys.stdin.readline):
        pass


if __name__ == "__main__":
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(main(int(sys.argv[1]), int(sys.argv[2])))
