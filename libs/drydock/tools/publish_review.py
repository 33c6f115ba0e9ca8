"""``publish_review``: post the thread's findings on the pull request as one GitHub review
(:func:`drydock.review.publish.publish`): new findings as inline comments with a summary,
replies and resolved threads for findings closed since. Publishing twice posts once."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from drydock.bus.envelopes import Channel, EventType
from drydock.review.findings import Severity
from drydock.review.publish import PublishPolicy, publish
from drydock.tools.context import ToolContext
from drydock.tools.github_access import refusing
from drydock.tools.review_access import ReviewAccess

NAME = "publish_review"

DESCRIPTION = (
    "Post your review on the pull request: the findings not posted yet become inline comments of one "
    "GitHub review with `summary` as its body; findings resolved or dismissed since get their note as a "
    "reply and their thread resolved. Call it once, after recording every finding. Calling it again "
    "posts only what changed."
)


class PublishReviewInput(BaseModel):
    summary: str = Field(
        default="", max_length=8000, description="The review's overall assessment, in a few sentences."
    )


def build(context: ToolContext) -> BaseTool:
    review = context.settings.review
    policy = PublishPolicy(min_severity=Severity(review.min_severity), max_comments=review.max_comments)

    async def publish_review(summary: str = "") -> dict[str, Any]:
        access = await ReviewAccess.of(context)
        result = await refusing(
            publish(
                client=access.github(),
                authorization=await access.authorization(),
                target=access.target,
                store=access.findings,
                redis=context.redis,
                keys=context.keys,
                policy=policy,
                summary=summary,
            )
        )
        if result.review_id is not None:
            await context.emit(
                EventType.MESSAGE_POSTED,
                channel=Channel.GITHUB.value,
                target=f"{access.target.repository}#{access.target.number}",
                url=result.review_url,
            )
        answer: dict[str, Any] = {
            "review_url": result.review_url,
            "posted": result.posted,
            "replied": result.replied,
            "resolved_threads": result.resolved_threads,
            "not_posted_inline": result.held_back,
        }
        if result.reconciled:
            answer["recovered"] = result.reconciled
        if result.nothing_new:
            answer["note"] = "Nothing new to publish: every finding is already on GitHub."
        return answer

    return StructuredTool.from_function(
        coroutine=publish_review,
        name=NAME,
        description=DESCRIPTION,
        args_schema=PublishReviewInput,
        handle_tool_error=True,
    )
