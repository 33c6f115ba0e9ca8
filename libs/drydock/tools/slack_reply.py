"""``slack_reply``: post in the Slack thread this thread came from. A thread from elsewhere gets
an answer saying so, since there is no Slack conversation to post in."""

from __future__ import annotations

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from drydock.bus.envelopes import Channel, EventType
from drydock.tools.context import ToolContext

NAME = "slack_reply"

MAX_TEXT = 40_000
"""Slack truncates a message's text beyond 40,000 characters."""

DESCRIPTION = (
    "Post a message (Slack mrkdwn) in the Slack thread this conversation came from: progress, a "
    "question, or the result with links. Only for threads that started in Slack."
)


class SlackReplyInput(BaseModel):
    text: str = Field(min_length=1, max_length=MAX_TEXT, description="The message, in Slack mrkdwn.")


def build(context: ToolContext) -> BaseTool:
    async def slack_reply(text: str) -> str:
        address = context.scope.reply_to
        if address.channel is not Channel.SLACK:
            return (
                f"Not posted: this thread came from {address.channel.value}, not from Slack. "
                "Answer through that channel instead."
            )
        if not context.outbound.configured(Channel.SLACK):
            raise ToolException("Slack is not configured for this Drydock installation; nothing was posted.")
        await context.outbound.reply_once(context.effects, address, text)
        where = address.address
        target = f"{where.get('channel', '')}/{where.get('thread_ts', '')}"
        await context.emit(EventType.MESSAGE_POSTED, channel=Channel.SLACK.value, target=target, url=None)
        return "Posted in the Slack thread."

    return StructuredTool.from_function(
        coroutine=slack_reply, name=NAME, description=DESCRIPTION, args_schema=SlackReplyInput, handle_tool_error=True
    )
