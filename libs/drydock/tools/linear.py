"""``linear``: read a Linear issue, comment on it, or move it to another workflow state.

The issue defaults to the one the thread came from. A comment on that issue answers in the
conversation the thread came from (the agent session, or the triggering comment's thread), as
every reply to Linear does; a comment on another issue is a new top-level comment.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from drydock.bus.envelopes import Channel, EventType
from drydock.channels.errors import OutboundFailed
from drydock.channels.linear.client import LinearClient
from drydock.tools.context import ToolContext

NAME = "linear"

MAX_COMMENTS = 50
"""The most recent comments returned with an issue."""

DESCRIPTION = (
    "Work with Linear issues. action=get_issue returns an issue's title, description, state and "
    "recent comments; action=comment posts `body` (Markdown) on it; action=update_state moves it "
    "to the workflow state named `state` (e.g. 'In Progress', 'In Review', 'Done'). `issue_id` "
    "(an id or an identifier like ENG-123) defaults to the issue this thread came from."
)

Action = Literal["get_issue", "comment", "update_state"]


class LinearInput(BaseModel):
    action: Action = Field(description="get_issue, comment or update_state.")
    issue_id: str | None = Field(
        default=None, min_length=1, max_length=64, description="Issue id or identifier; omit for the thread's."
    )
    body: str | None = Field(default=None, min_length=1, max_length=65_536, description="For comment: the text.")
    state: str | None = Field(
        default=None, min_length=1, max_length=100, description="For update_state: the state's name."
    )


def build(context: ToolContext) -> BaseTool:
    own_issue = (
        context.scope.reply_to.address.get("issue_id") if context.scope.reply_to.channel is Channel.LINEAR else None
    )

    async def get_issue(client: LinearClient, issue_id: str) -> dict[str, Any]:
        issue = await client.issue(issue_id)
        states = await client.issue_states(issue.id)
        return {
            "id": issue.id,
            "identifier": issue.identifier,
            "title": issue.title,
            "description": issue.description,
            "url": issue.url,
            "state": states.current.name if states.current else None,
            "comments": [
                {"author": comment.author_name, "body": comment.body, "created_at": comment.created_at}
                for comment in issue.comments[-MAX_COMMENTS:]
            ],
        }

    async def comment(client: LinearClient, issue_id: str, body: str | None) -> dict[str, Any]:
        if body is None:
            raise ToolException("action=comment needs a `body`.")
        if issue_id == own_issue:
            await context.outbound.reply_once(context.effects, context.scope.reply_to, body)
            comment_id = None
        else:

            async def post(effect_id: str) -> dict[str, Any]:
                return {"comment_id": await client.create_comment(issue_id, body)}

            # Ledger only: a Linear comment carries no marker Drydock could look up.
            comment_id = (await context.effects.once("linear_comment", post))["comment_id"]
        await context.emit(EventType.MESSAGE_POSTED, channel=Channel.LINEAR.value, target=issue_id, url=None)
        return {"posted": True, "issue_id": issue_id, "comment_id": comment_id}

    async def update_state(client: LinearClient, issue_id: str, state: str | None) -> dict[str, Any]:
        if state is None:
            raise ToolException("action=update_state needs a `state`.")
        states = await client.issue_states(issue_id)
        wanted = next((found for found in states.available if found.name.casefold() == state.casefold()), None)
        if wanted is None:
            names = ", ".join(found.name for found in states.available)
            raise ToolException(
                f"Linear has no state {state!r} for {states.identifier or issue_id}; choose one of: {names}."
            )
        previous = states.current.name if states.current else None
        if states.current is not None and states.current.id == wanted.id:
            return {"issue": states.identifier, "state": wanted.name, "changed": False}
        now = await client.update_issue_state(states.issue_id, wanted.id)
        return {"issue": states.identifier, "state": now.name, "previous": previous, "changed": True}

    async def linear(
        action: Action, issue_id: str | None = None, body: str | None = None, state: str | None = None
    ) -> dict[str, Any]:
        client = context.outbound.linear
        if client is None:
            raise ToolException("Linear is not configured for this Drydock installation.")
        target = issue_id or own_issue
        if target is None:
            raise ToolException("This thread did not come from a Linear issue; give `issue_id`.")
        try:
            match action:
                case "get_issue":
                    return await get_issue(client, target)
                case "comment":
                    return await comment(client, target, body)
                case "update_state":
                    return await update_state(client, target, state)
        except OutboundFailed as failure:
            # Linear answers a missing entity with 200 and validation errors with 400.
            if failure.status in {200, 400}:
                raise ToolException(failure.reason) from None
            raise
        raise ToolException(f"Unknown action {action!r}.")

    return StructuredTool.from_function(
        coroutine=linear, name=NAME, description=DESCRIPTION, args_schema=LinearInput, handle_tool_error=True
    )
