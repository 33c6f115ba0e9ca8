"""``request_review``: ask Drydock's reviewer to review a pull request this thread opened.

The request reaches the reviewer the way a pull request webhook does: a message in the reviewer
thread's inbox (``ids.reviewer`` of the pull request; its metadata created first when new), then
a reviewer wake. The message's delivery id names the head revision, so asking twice for the
same revision is stored once. Repositories where an admin has not enabled review are refused.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from drydock.accounts import AccountsStore
from drydock.bus.envelopes import Author, Channel, InboxMessage, ReplyAddress, Trigger
from drydock.roles import Role
from drydock.threads import ids
from drydock.threads.fields import new_thread_fields
from drydock.threads.handoff import hand_off
from drydock.threads.metadata import ThreadMetadataStore
from drydock.tools.context import ToolContext
from drydock.tools.github_access import GithubAccess, refusing

NAME = "request_review"

DESCRIPTION = (
    "Ask Drydock's reviewer to review a pull request this thread opened, at its current head "
    "commit (push first). Without `number` it is the thread's only pull request. The review is "
    "posted on the pull request by the reviewer, and its comments come back to this thread."
)


class RequestReviewInput(BaseModel):
    number: int | None = Field(default=None, ge=1, description="The pull request; omit for the thread's only one.")
    note: str | None = Field(
        default=None, max_length=4000, description="What the reviewer should look at closely (optional)."
    )


def build(context: ToolContext) -> BaseTool:
    async def request_review(number: int | None = None, note: str | None = None) -> dict[str, Any]:
        access = GithubAccess.of(context)
        record = await access.thread_pull(number)
        repository, number = access.repository, record.number
        accounts = AccountsStore(context.redis, context.keys, host=access.host)
        settings = await accounts.repository(repository)
        if settings is None or not settings.reviewer:
            raise ToolException(
                f"Drydock's reviewer is not enabled on {repository}; an admin can enable it in the dashboard."
            )

        async def read(authorization: str) -> dict[str, Any]:
            return await access.client.get_pull(authorization, repository, number)

        pull = await refusing(access.as_user_or_app(read))
        if pull.get("state") != "open":
            raise ToolException(f"Pull request #{number} of {repository} is {pull.get('state')}; nothing to review.")
        head = pull.get("head") or {}
        head_sha, head_ref = str(head.get("sha") or ""), str(head.get("ref") or record.branch)
        owner, _, name = repository.partition("/")
        reviewer_thread = ids.reviewer(access.host, owner, name, number)
        text = f"Pull request #{number} review requested by the coder: {pull.get('title') or ''}".rstrip()
        message = InboxMessage(
            delivery_id=f"review-request-{number}-{head_sha or 'unknown'}",
            thread_id=reviewer_thread,
            channel=Channel.GITHUB,
            author=Author(
                channel=Channel.GITHUB,
                external_id=f"coder:{context.scope.thread_id}",
                name="Drydock coder",
                user_id=context.scope.user_id,
            ),
            text=f"{text}\n\n{note}" if note else text,
            repository=settings.full_name,
            references={
                "repository": settings.full_name,
                "event": "review_request",
                "pull_request": str(number),
                "head_ref": head_ref,
                "head_sha": head_sha,
                "url": str(pull.get("html_url") or ""),
                "requested_by": context.scope.thread_id,
            },
            reply_to=ReplyAddress(
                channel=Channel.GITHUB,
                address={
                    "host": access.host,
                    "repository": settings.full_name,
                    "number": str(number),
                    "kind": "pull_request",
                    "head_sha": head_sha,
                },
            ),
            trigger=Trigger.REVIEW_REQUEST,
        )
        metadata = ThreadMetadataStore(context.redis, context.keys)
        appended = await hand_off(
            context.bus, metadata, Role.REVIEWER, message, create=new_thread_fields(message, created_by="coder")
        )
        return {
            "number": number,
            "head_sha": head_sha,
            "reviewer_thread": reviewer_thread,
            "already_requested": appended.duplicate,
        }

    return StructuredTool.from_function(
        coroutine=request_review,
        name=NAME,
        description=DESCRIPTION,
        args_schema=RequestReviewInput,
        handle_tool_error=True,
    )
