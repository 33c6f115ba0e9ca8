"""``update_finding``: resolve, dismiss or reopen a finding, answer in its review thread, or
correct one not posted yet. A note on a posted finding is posted as a reply by the next
``publish_review``, which also resolves the review thread of a resolved or dismissed one."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from drydock.review.findings import Finding, FindingStatus, Severity, UnknownFinding, close
from drydock.tools.context import ToolContext
from drydock.tools.list_findings import describe
from drydock.tools.review_access import ReviewAccess

NAME = "update_finding"

DESCRIPTION = (
    "Change a finding: `status` resolved (the code now fixes it), dismissed (not a problem after all, or "
    "a person explained why it does not apply) or open (it came back); `note` says why and is posted as a "
    "reply in the finding's GitHub thread by publish_review; without a status change a note is just a "
    "reply. `requested_by` names the person whose message led to the change. Severity, confidence, "
    "description and suggestion can be corrected only before the finding is posted."
)


class UpdateFindingInput(BaseModel):
    id: str = Field(pattern=r"^F\d+$", description="The finding, e.g. F3.")
    status: Literal["open", "resolved", "dismissed"] | None = Field(default=None, description="The new status.")
    note: str | None = Field(default=None, max_length=4000, description="Why, or your answer in its thread.")
    requested_by: str | None = Field(default=None, max_length=100, description="The person who asked for it.")
    severity: Literal["critical", "high", "medium", "low", "info"] | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    description: str | None = Field(default=None, min_length=1, max_length=8000)
    suggestion: str | None = Field(default=None, max_length=8000)


def build(context: ToolContext) -> BaseTool:
    async def update_finding(
        id: str,
        status: Literal["open", "resolved", "dismissed"] | None = None,
        note: str | None = None,
        requested_by: str | None = None,
        severity: Literal["critical", "high", "medium", "low", "info"] | None = None,
        confidence: float | None = None,
        description: str | None = None,
        suggestion: str | None = None,
    ) -> dict[str, Any]:
        access = await ReviewAccess.of(context)
        edits: dict[str, Any] = {
            name: value
            for name, value in (
                ("severity", Severity(severity) if severity else None),
                ("confidence", confidence),
                ("description", description),
                ("suggestion", suggestion),
            )
            if value is not None
        }
        if status is None and note is None and not edits:
            raise ToolException("Nothing to change: give a status, a note or a correction.")
        head_sha = access.target.head_sha

        def change(finding: Finding) -> Finding:
            if edits and finding.published:
                raise ToolException(
                    f"{finding.id} is already posted on GitHub; its text cannot change. Reply with `note` instead."
                )
            updated = finding.model_copy(update=edits)
            if status in ("resolved", "dismissed"):
                return close(
                    updated, FindingStatus(status), note=note, by=requested_by or "reviewer", head_sha=head_sha
                )
            if status == "open":
                updated = updated.model_copy(
                    update={"status": FindingStatus.OPEN, "closed_by": None, "closed_sha": None, "note": note,
                            "thread_resolved": False}
                )  # fmt: skip
            if note is not None:
                updated = updated.model_copy(update={"note": note, "reply": note if finding.published else None})
            return updated

        try:
            finding = await access.findings.update(id, change)
        except UnknownFinding as error:
            raise ToolException(str(error)) from None
        return describe(finding)

    return StructuredTool.from_function(
        coroutine=update_finding,
        name=NAME,
        description=DESCRIPTION,
        args_schema=UpdateFindingInput,
        handle_tool_error=True,
    )
