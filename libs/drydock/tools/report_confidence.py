"""``report_confidence``: the coder states how sure it is that its change fixes what a repair run
asked for, with its diagnosis. Recorded per run in Redis; during an autofix repair the
credential proxy refuses the thread's pushes until a confidence at or above the repair's
threshold is recorded (:mod:`drydock.autofix.repairs`). Below the threshold the answer tells
the agent to explain on the pull request instead of pushing.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from drydock.autofix.repairs import Repairs
from drydock.tools.context import ToolContext

NAME = "report_confidence"

DESCRIPTION = (
    "Report how confident you are (0 to 1) that your change fixes the problem you were asked to repair, "
    "with a short diagnosis of the cause. Required in an autofix repair run before you push: pushes are "
    "refused until a confidence at or above the run's threshold is recorded. Below the threshold, do not "
    "push; explain your diagnosis on the pull request instead. Returns whether you may push."
)


class ReportConfidenceInput(BaseModel):
    confidence: float = Field(ge=0.0, le=1.0, description="0: a guess; 1: certain, verified by the tests.")
    diagnosis: str = Field(min_length=1, max_length=4000, description="What caused the problem and what fixes it.")


def build(context: ToolContext) -> BaseTool:
    async def report_confidence(confidence: float, diagnosis: str) -> dict[str, Any]:
        scope = context.scope
        repair = await Repairs(context.redis, context.keys).report(scope.thread_id, scope.run_id, confidence, diagnosis)
        if repair is None:
            return {
                "recorded": True,
                "repair": None,
                "may_push": True,
                "note": "No autofix repair is active for this thread; pushes are not gated.",
            }
        pull = f"{repair.repository}#{repair.number}"
        if repair.push_allowed:
            note = (
                f"At or above the threshold {repair.threshold:g}: commit the fix on the branch of {pull} and push it."
            )
        else:
            note = (
                f"Below the threshold {repair.threshold:g}: do not push. Explain your diagnosis and what a person "
                f"should check on {pull} with github_comment (number {repair.number})."
            )
        return {
            "recorded": True,
            "repair": repair.id,
            "pull_request": pull,
            "threshold": repair.threshold,
            "may_push": repair.push_allowed,
            "note": note,
        }

    return StructuredTool.from_function(
        coroutine=report_confidence,
        name=NAME,
        description=DESCRIPTION,
        args_schema=ReportConfidenceInput,
        handle_tool_error=True,
    )
