"""``open_pull_request``: open a pull request from a branch the agent pushed, and record it.

The durable PR record (:class:`~drydock.threads.pr_records.PullRequestStore`) is what routes
later comments, reviews and pushes on the pull request back to this thread. When GitHub already
has an open pull request for the branch, that one is returned and recorded instead (a retried
call after a lost answer must not fail); one another thread recorded is refused.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from drydock.accounts import AccountsStore
from drydock.bus.envelopes import Channel, EventType
from drydock.github import PullRequestExists
from drydock.threads.pr_records import PullRequestRecord, PullRequestState
from drydock.tools.context import ToolContext, refuse_before_approval
from drydock.tools.github_access import GithubAccess, refusing

NAME = "open_pull_request"

DESCRIPTION = (
    "Open a pull request on this thread's repository from a branch you have already committed to "
    "and pushed. `base` defaults to the repository's default branch, `draft` to the user's "
    "preference. If a pull request is already open for the branch, that one is returned. Later "
    "comments and reviews on the pull request come back to this thread. Returns its number and URL."
)


class OpenPullRequestInput(BaseModel):
    title: str = Field(min_length=1, max_length=256, description="The pull request's title.")
    head: str = Field(min_length=1, max_length=255, description="The pushed branch with the changes.")
    body: str = Field(default="", max_length=65_536, description="The description, in GitHub Markdown.")
    base: str | None = Field(default=None, max_length=255, description="The branch to merge into.")
    draft: bool | None = Field(default=None, description="Open as a draft; omit for the user's preference.")


async def _draft_preference(context: ToolContext) -> bool:
    user_id = context.scope.user_id
    if user_id is None:
        return False
    accounts = AccountsStore(context.redis, context.keys, host=context.settings.github.host)
    return (await accounts.profile(user_id)).draft_prs


def build(context: ToolContext) -> BaseTool:
    async def open_pull_request(
        title: str, head: str, body: str = "", base: str | None = None, draft: bool | None = None
    ) -> dict[str, Any]:
        await refuse_before_approval(context)
        access = GithubAccess.of(context)
        client, repository = access.client, access.repository
        branch = head.removeprefix("refs/heads/")
        if ":" in branch:
            raise ToolException(f"`head` is a branch of {repository} itself, without an `owner:` prefix.")
        draft = await _draft_preference(context) if draft is None else draft

        async def open_or_find(authorization: str) -> tuple[dict[str, Any], bool]:
            into = base or str((await client.get_repository(authorization, repository))["default_branch"])
            try:
                return await client.create_pull(
                    authorization, repository, title=title, head=branch, base=into, body=body, draft=draft
                ), True
            except PullRequestExists:
                found = await client.list_pulls(authorization, repository, head=f"{access.owner}:{branch}")
                if not found:
                    raise
                return found[0], False

        async def open_once(effect_id: str) -> dict[str, Any]:
            pull, created = await refusing(access.as_user_or_app(open_or_find))
            return {
                "number": int(pull["number"]),
                "html_url": str(pull.get("html_url") or ""),
                "draft": bool(pull.get("draft")),
                "base": {"ref": str((pull.get("base") or {}).get("ref") or "")},
                "created": created,
            }

        # A replay of a claimed call opens or finds by the head branch, which GitHub keeps to one
        # open pull request: that lookup is the marker.
        pull = await context.effects.once("pull_request", open_once)
        created = bool(pull["created"])
        number = int(pull["number"])
        existing = await access.records.find(access.host, repository, number)
        if existing is not None and existing.thread_id != context.scope.thread_id:
            raise ToolException(
                f"Branch {branch} already has pull request #{number}, opened by another Drydock thread; "
                "push your changes to a branch of your own."
            )
        await access.records.record(
            PullRequestRecord(
                host=access.host,
                repository=repository,
                number=number,
                thread_id=context.scope.thread_id,
                branch=branch,
                state=PullRequestState.OPEN,
                created_at=existing.created_at if existing is not None else datetime.now(UTC),
            )
        )
        url = str(pull.get("html_url") or "")
        if created or existing is None:
            await context.emit(
                EventType.MESSAGE_POSTED, channel=Channel.GITHUB.value, target=f"{repository}#{number}", url=url
            )
        return {
            "number": number,
            "html_url": url,
            "created": created,
            "draft": bool(pull.get("draft")),
            "head": branch,
            "base": str((pull.get("base") or {}).get("ref") or ""),
        }

    return StructuredTool.from_function(
        coroutine=open_pull_request,
        name=NAME,
        description=DESCRIPTION,
        args_schema=OpenPullRequestInput,
        handle_tool_error=True,
    )
