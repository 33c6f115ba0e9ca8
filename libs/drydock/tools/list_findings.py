"""``list_findings``: the findings recorded on the pull request under review, in earlier runs too."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from drydock.review.findings import Finding, FindingStatus
from drydock.tools.context import ToolContext
from drydock.tools.review_access import ReviewAccess

NAME = "list_findings"

DESCRIPTION = (
    "List the findings recorded on this pull request (also by earlier reviews of it): id, status, "
    "severity, where, whether it is posted on GitHub, and any note. Look at them before adding new "
    "ones and after a push, to resolve those the new commits fixed."
)


class ListFindingsInput(BaseModel):
    status: Literal["open", "resolved", "dismissed", "all"] = Field(default="all", description="Which findings.")


def describe(finding: Finding) -> dict[str, Any]:
    """A finding as the model sees it."""
    shown: dict[str, Any] = {
        "id": finding.id,
        "status": finding.status.value,
        "severity": finding.severity.value,
        "confidence": finding.confidence,
        "category": finding.category,
        "title": finding.title,
        "where": f"{finding.path}:{finding.lines()} ({finding.side.value})",
        "posted": finding.published,
        "first_seen": finding.first_seen_sha[:12],
        "last_confirmed": finding.last_confirmed_sha[:12],
    }
    if finding.note:
        shown["note"] = finding.note
    if finding.closed_by:
        shown["closed_by"] = finding.closed_by
    if finding.reply:
        shown["reply_to_post"] = finding.reply
    return shown


def build(context: ToolContext) -> BaseTool:
    async def list_findings(status: Literal["open", "resolved", "dismissed", "all"] = "all") -> dict[str, Any]:
        access = await ReviewAccess.of(context)
        wanted = None if status == "all" else FindingStatus(status)
        found = await access.findings.all(status=wanted)
        return {
            "pull_request": access.target.number,
            "head_sha": access.target.head_sha,
            "findings": [describe(finding) for finding in found],
        }

    return StructuredTool.from_function(
        coroutine=list_findings,
        name=NAME,
        description=DESCRIPTION,
        args_schema=ListFindingsInput,
        handle_tool_error=True,
    )
