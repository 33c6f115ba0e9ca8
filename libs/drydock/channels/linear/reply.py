"""Answering on Linear: a response activity in the agent session when there is one, else a
comment in the triggering comment's thread; pickup is acknowledged the same way."""

from __future__ import annotations

from drydock.bus.envelopes import InboxMessage, ReplyAddress
from drydock.channels.linear.client import LinearClient

PICKUP = "👀 On it."


class LinearReplies:
    def __init__(self, client: LinearClient) -> None:
        self._client = client

    async def reply(self, address: ReplyAddress, text: str, *, effect: str | None = None) -> None:
        where = address.address
        if where.get("agent_session_id"):
            await self._client.create_agent_activity(where["agent_session_id"], "response", text)
        else:
            await self._client.create_comment(where["issue_id"], text, parent_id=where.get("parent_comment_id"))

    async def find_reply(self, address: ReplyAddress, effect: str) -> bool:
        """Linear replies carry no marker yet: a replay after a crash between the post and the
        ledger record posts again."""
        return False

    async def acknowledge(self, message: InboxMessage) -> bool:
        """A thought activity in the agent session (Linear shows an agent that does not answer
        within 10 s as unresponsive), or a short comment in the comment's thread."""
        where = message.reply_to.address
        if where.get("agent_session_id"):
            await self._client.create_agent_activity(where["agent_session_id"], "thought", PICKUP)
        else:
            await self._client.create_comment(where["issue_id"], PICKUP, parent_id=where.get("parent_comment_id"))
        return True
