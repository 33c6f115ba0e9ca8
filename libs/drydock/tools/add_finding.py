"""``add_finding``: record a problem in the pull request under review, on lines of its diff.

The lines must be in the diff (GitHub accepts review comments only there); the tool answers
with the commentable ranges otherwise. A finding equal by fingerprint to an open one confirms
that one instead of adding it twice. Nothing is posted until ``publish_review``.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from drydock.review.diff import AnchorError, Side
from drydock.review.findings import Draft, FindingStatus, Severity
from drydock.tools.context import ToolContext
from drydock.tools.review_access import ReviewAccess

NAME = "add_finding"

DESCRIPTION = (
    "Record one problem you found in the pull request under review. Point it at lines of the diff: "
    "`path` as in the diff, `start_line`..`end_line` on side RIGHT (the new version: added or context "
    "lines) or LEFT (removed lines, old numbers). Give a `suggestion` only when you can write the exact "
    "replacement for those lines. Returns the finding's id; a finding already recorded is confirmed, not "
    "added twice. Findings are posted on GitHub only by publish_review."
)


class AddFindingInput(BaseModel):
    severity: Literal["critical", "high", "medium", "low", "info"] = Field(
        description="critical: breaks production or security; high: a real bug; medium: likely problem; "
        "low: minor issue; info: a remark."
    )
    confidence: float = Field(ge=0.0, le=1.0, description="How sure you are that this is a real problem (0-1).")
    category: str = Field(
        min_length=1, max_length=40, description="e.g. correctness, security, performance, tests, style, docs."
    )
    title: str = Field(min_length=1, max_length=120, description="The problem in a few words.")
    path: str = Field(min_length=1, description="The file's path in the repository, as in the diff.")
    start_line: int = Field(ge=1, description="First line of the range.")
    end_line: int | None = Field(default=None, ge=1, description="Last line of the range; omit for one line.")
    side: Literal["RIGHT", "LEFT"] = Field(default="RIGHT", description="RIGHT: new version; LEFT: old version.")
    description: str = Field(min_length=1, max_length=8000, description="What is wrong and why, for the author.")
    suggestion: str | None = Field(
        default=None, max_length=8000, description="The exact replacement text for the lines (optional)."
    )


def build(context: ToolContext) -> BaseTool:
    async def add_finding(
        severity: Literal["critical", "high", "medium", "low", "info"],
        confidence: float,
        category: str,
        title: str,
        path: str,
        start_line: int,
        description: str,
        end_line: int | None = None,
        side: Literal["RIGHT", "LEFT"] = "RIGHT",
        suggestion: str | None = None,
    ) -> dict[str, Any]:
        access = await ReviewAccess.of(context)
        end = end_line if end_line is not None else start_line
        try:
            diff = access.target.diff().check(path, start_line, end, Side(side))
        except AnchorError as error:
            raise ToolException(str(error)) from None
        draft = Draft(
            severity=Severity(severity),
            confidence=confidence,
            category=category.strip().lower(),
            title=title.strip(),
            path=diff.path,
            start_line=start_line,
            end_line=end,
            side=Side(side),
            description=description.strip(),
            suggestion=suggestion,
        )
        added = await access.findings.add(
            draft, head_sha=access.target.head_sha, anchored=diff.text(Side(side), start_line, end)
        )
        finding = added.finding
        answer: dict[str, Any] = {"id": finding.id, "created": added.created, "status": finding.status.value}
        if not added.created:
            answer["note"] = (
                f"{finding.id} already records this problem; it was dismissed ({finding.note or 'no note'}) "
                "and stays dismissed."
                if finding.status is FindingStatus.DISMISSED
                else f"{finding.id} already records this problem; it is confirmed at this head."
            )
        return answer

    return StructuredTool.from_function(
        coroutine=add_finding,
        name=NAME,
        description=DESCRIPTION,
        args_schema=AddFindingInput,
        handle_tool_error=True,
    )
