"""``submit_plan``: under plan approval (:mod:`drydock.threads.approvals`), the coder submits its
plan, a short description and its steps (the todo list it wrote with ``write_todos``). The plan
is recorded as held, posted in the source channel and shown on the dashboard (a
``plan_submitted`` event); until the thread's owner approves the newest plan, the credential
proxy refuses the thread's pushes and the writing tools refuse too. A revised plan (the owner
replied with changes) is submitted again and is held again.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from drydock.bus import EventType
from drydock.threads.approvals import PlanGate, plan_notice
from drydock.tools.context import ToolContext

NAME = "submit_plan"

DESCRIPTION = (
    "Submit your plan for the thread owner's approval when plan approval is on (a refused write or push says "
    "so): a short description of what you will change and why, and your steps (the todo list you wrote with "
    "write_todos). The plan is posted in the conversation; end your turn after submitting and change nothing "
    "until it is approved. If the owner replies with changes, revise the plan and submit it again."
)


class SubmitPlanInput(BaseModel):
    description: str = Field(min_length=1, max_length=4000, description="What you will change and why, briefly.")
    steps: list[str] = Field(min_length=1, max_length=50, description="Your todo list, in order.")


def build(context: ToolContext) -> BaseTool:
    async def submit_plan(description: str, steps: list[str]) -> dict[str, Any]:
        scope = context.scope
        gate = PlanGate.create(context.redis, context.keys, context.settings)
        if gate is None or not await gate.required(scope.thread_id, scope.repository):
            return {"submitted": False, "note": "Plan approval is not on for this thread: go ahead with the work."}
        todos = [{"content": step.strip()[:500], "status": "pending"} for step in steps if step.strip()]
        if not todos:
            raise ToolException("a plan needs at least one step")
        plan = await gate.approvals.submit_plan(scope.thread_id, description.strip(), todos)
        team = await gate.accounts.team()
        handle = team.mention_handle or context.settings.ingress.mention_handle
        posted = context.outbound.configured(scope.reply_to.channel)
        if posted:
            await context.outbound.reply_once(
                context.effects, scope.reply_to, plan_notice(plan, handle), approve_button=True
            )
        await context.emit(
            EventType.PLAN_SUBMITTED, revision=plan.revision, description=plan.description, todos=list(plan.todos)
        )
        return {
            "submitted": True,
            "revision": plan.revision,
            "posted": posted,
            "note": "Held for the thread owner's approval. End your turn now; do not change the repository until "
            "it is approved.",
        }

    return StructuredTool.from_function(
        coroutine=submit_plan,
        name=NAME,
        description=DESCRIPTION,
        args_schema=SubmitPlanInput,
        handle_tool_error=True,
    )
