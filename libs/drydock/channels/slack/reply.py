"""Answering on Slack: a reply in the thread, and the 👀 reaction that acknowledges pickup."""

from __future__ import annotations

from typing import Any

from drydock.bus.envelopes import InboxMessage, ReplyAddress
from drydock.channels.buttons import Button
from drydock.channels.slack.client import SlackClient


class SlackReplies:
    def __init__(self, client: SlackClient) -> None:
        self._client = client

    async def reply(self, address: ReplyAddress, text: str, *, effect: str | None = None) -> None:
        where = address.address
        await self._client.post_in_thread(where["channel"], where["thread_ts"], text, effect=effect)

    async def reply_with_button(
        self, address: ReplyAddress, text: str, button: Button, *, effect: str | None = None
    ) -> None:
        """Post ``text`` in the thread with ``button`` under it (Block Kit: a section, an actions block)."""
        where = address.address
        blocks: list[dict[str, Any]] = [
            {"type": "section", "text": {"type": "mrkdwn", "text": text[:2900]}},
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "action_id": button.action_id,
                        "text": {"type": "plain_text", "text": button.text},
                        "value": button.value,
                        "style": "primary",
                    }
                ],
            },
        ]
        await self._client.post_in_thread(where["channel"], where["thread_ts"], text, effect=effect, blocks=blocks)

    async def find_reply(self, address: ReplyAddress, effect: str) -> bool:
        """Whether the thread holds a reply posted as ``effect`` (found by its message metadata)."""
        where = address.address
        return await self._client.find_effect(where["channel"], where["thread_ts"], effect) is not None

    async def acknowledge(self, message: InboxMessage) -> bool:
        """React with 👀 to the message that triggered the run."""
        refs = message.references
        if not refs.get("slack_channel") or not refs.get("slack_ts"):
            return False
        await self._client.add_reaction(refs["slack_channel"], refs["slack_ts"], "eyes")
        return True
