"""``update_pull_request``: change the title, description, base branch or open/closed state of a
pull request this thread opened. Pull requests of other threads or of people are refused.

Draft status is left out: GitHub's REST API cannot change it (only the GraphQL mutations
``markPullRequestReadyForReview`` and ``convertPullRequestToDraft`` can).
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from drydock.threads.pr_records import PullRequestState
from drydock.tools.context import ToolContext, refuse_before_approval
from drydock.tools.github_access import GithubAccess, refusing

NAME = "update_pull_request"

DESCRIPTION = (
    "Change a pull request this thread opened: its title, description (body), base branch, or "
    "state (closed to close it, open to reopen it). Without `number` it changes the thread's only "
    "pull request. To change the code, commit and push to its branch instead. Draft status cannot "
    "be changed with this tool. Returns the pull request's number, URL and state."
)


class UpdatePullRequestInput(BaseModel):
    number: int | None = Field(default=None, ge=1, description="The pull request; omit for the thread's only one.")
    title: str | None = Field(default=None, min_length=1, max_length=256, description="The new title.")
    body: str | None = Field(default=None, max_length=65_536, description="The new description (replaces it).")
    base: str | None = Field(default=None, min_length=1, max_length=255, description="The new base branch.")
    state: Literal["open", "closed"] | None = Field(default=None, description="closed closes it, open reopens it.")


def build(context: ToolContext) -> BaseTool:
    async def update_pull_request(
        number: int | None = None,
        title: str | None = None,
        body: str | None = None,
        base: str | None = None,
        state: Literal["open", "closed"] | None = None,
    ) -> dict[str, Any]:
        await refuse_before_approval(context)
        changes = {
            name: value
            for name, value in (("title", title), ("body", body), ("base", base), ("state", state))
            if value is not None
        }
        if not changes:
            raise ToolException("Nothing to change: give a title, body, base or state.")
        access = GithubAccess.of(context)
        record = await access.thread_pull(number)
        client = access.client

        async def update(authorization: str) -> dict[str, Any]:
            return await client.update_pull(authorization, access.repository, record.number, changes)

        async def update_once(effect_id: str) -> dict[str, Any]:
            changed = await refusing(access.as_user_or_app(update))
            return {key: changed.get(key) for key in ("merged", "state", "html_url", "title", "base")}

        # Without a marker: a replay of a claimed call sets the same values again. A recorded
        # one is not repeated, so it cannot undo what someone changed on GitHub since.
        pull = await context.effects.once("pull_request_update", update_once)
        if pull.get("merged"):
            now = PullRequestState.MERGED
        else:
            now = PullRequestState.CLOSED if pull.get("state") == "closed" else PullRequestState.OPEN
        if now is not record.state:
            await access.records.set_state(access.host, access.repository, record.number, now)
        return {
            "number": record.number,
            "html_url": str(pull.get("html_url") or ""),
            "state": now.value,
            "title": str(pull.get("title") or ""),
            "base": str((pull.get("base") or {}).get("ref") or ""),
        }

    return StructuredTool.from_function(
        coroutine=update_pull_request,
        name=NAME,
        description=DESCRIPTION,
        args_schema=UpdatePullRequestInput,
        handle_tool_error=True,
    )
