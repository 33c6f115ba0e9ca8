"""The run's status on Slack: the assistant thread's status line ("is working…"), cleared
when the run ends (its final reply is the message)."""

from __future__ import annotations

from drydock.bus.envelopes import ReplyAddress
from drydock.channels.run_status import RunStatus
from drydock.channels.slack.client import SlackClient

WORKING = "is working…"


class SlackStatus:
    def __init__(self, client: SlackClient) -> None:
        self._client = client

    async def show(self, address: ReplyAddress, status: RunStatus, detail: str = "") -> dict[str, str]:
        where = address.address
        line = (detail or WORKING) if status is RunStatus.WORKING else ""
        await self._client.set_assistant_status(where["channel"], where["thread_ts"], line)
        return {}
