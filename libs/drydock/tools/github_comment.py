"""``github_comment``: comment on an issue or pull request of the thread's repository.

Without a number the comment goes to the thread's own issue or pull request (the one it came
from), else to the only pull request the thread opened. Comments are posted as the App, so the
ingress knows them for the agent's own and never routes them back as a follow-up.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from drydock.bus.envelopes import Channel, EventType
from drydock.effects import marked, marker
from drydock.tools.context import ToolContext
from drydock.tools.github_access import GithubAccess, refusing

NAME = "github_comment"

MAX_BODY = 65_536
"""GitHub's limit on a comment body, in characters."""

DESCRIPTION = (
    "Post a comment (GitHub Markdown) on an issue or pull request of this thread's repository. "
    "Without `number` it goes to the issue or pull request this thread came from, or else to the "
    "one pull request this thread opened. Returns the comment's id and URL."
)


class GithubCommentInput(BaseModel):
    body: str = Field(min_length=1, max_length=MAX_BODY, description="The comment, in GitHub Markdown.")
    number: int | None = Field(
        default=None, ge=1, description="Issue or pull request number; omit for the thread's own."
    )


def build(context: ToolContext) -> BaseTool:
    async def github_comment(body: str, number: int | None = None) -> dict[str, Any]:
        access = GithubAccess.of(context)
        if number is None:
            number = access.own_number()
        if number is None:
            pulls = await access.thread_pulls()
            if len(pulls) != 1:
                raise ToolException(
                    "This thread did not come from an issue or pull request of "
                    f"{access.repository}; say which one with `number`."
                )
            number = pulls[0].number
        installation, repository, on = access.own_installation(), access.repository, number

        def posted(comment: dict[str, Any]) -> dict[str, Any]:
            return {"id": comment.get("id"), "number": on, "html_url": str(comment.get("html_url") or "")}

        async def post(effect_id: str) -> dict[str, Any]:
            return posted(
                await refusing(access.client.post_comment(installation, repository, on, marked(body, effect_id)))
            )

        async def find(effect_id: str) -> dict[str, Any] | None:
            comments = await refusing(access.client.list_comments(installation, repository, on))
            sign = marker(effect_id)
            return next((posted(c) for c in comments if sign in str(c.get("body") or "")), None)

        result = await context.effects.once("github_comment", post, find=find)
        url = result["html_url"]
        await context.emit(EventType.MESSAGE_POSTED, channel=Channel.GITHUB.value, target=f"{repository}#{on}", url=url)
        return result

    return StructuredTool.from_function(
        coroutine=github_comment,
        name=NAME,
        description=DESCRIPTION,
        args_schema=GithubCommentInput,
        handle_tool_error=True,
    )
