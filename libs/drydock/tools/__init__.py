"""The flat registry of Drydock's own agent tools (DESIGN.md section 6).

Each tool is one module exporting ``NAME`` and ``build(context) -> BaseTool``; it is registered
here once and listed in the spec of the role that needs it (:mod:`drydock.worker.roles`). The
framework's file, shell, search, task and planning tools come from ``deepagents`` and are not
duplicated here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from langchain_core.tools import BaseTool

from drydock.threads.scope import ThreadScope
from drydock.tools import (
    add_finding,
    fetch_url,
    github_comment,
    http_get,
    http_request,
    linear,
    list_findings,
    open_pull_request,
    publish_review,
    report_confidence,
    request_review,
    save_guidelines,
    schedule_wakeup,
    slack_reply,
    submit_plan,
    update_finding,
    update_pull_request,
    web_search,
)
from drydock.tools.context import ToolContext

ToolFactory = Callable[[ToolContext], BaseTool]

REGISTRY: dict[str, ToolFactory] = {
    module.NAME: module.build
    for module in (
        http_request,
        web_search,
        fetch_url,
        linear,
        github_comment,
        open_pull_request,
        update_pull_request,
        request_review,
        schedule_wakeup,
        slack_reply,
        report_confidence,
        submit_plan,
        http_get,
        add_finding,
        update_finding,
        list_findings,
        publish_review,
        save_guidelines,
    )
}


def build_tools(names: Iterable[str], context: ToolContext) -> list[BaseTool]:
    """The tools named ``names``, bound to ``context``; unknown names raise :class:`KeyError`."""
    return [REGISTRY[name](context) for name in names]


__all__ = [
    "REGISTRY",
    "ThreadScope",
    "ToolContext",
    "ToolFactory",
    "build_tools",
]
