"""The run's status on Linear: agent activities in the agent session (a thought while working,
an error when stopped). Comment-triggered runs have no session and show no status; a finished
run's status is its response, which the agent posts itself."""

from __future__ import annotations

from drydock.bus.envelopes import ReplyAddress
from drydock.channels.linear.client import LinearClient
from drydock.channels.run_status import RunStatus


class LinearStatus:
    def __init__(self, client: LinearClient) -> None:
        self._client = client

    async def show(self, address: ReplyAddress, status: RunStatus, detail: str = "") -> dict[str, str]:
        session = address.address.get("agent_session_id")
        if not session or status is RunStatus.FINISHED:
            return {}
        if status is RunStatus.WORKING:
            await self._client.create_agent_activity(session, "thought", detail or "Working…")
        elif status is RunStatus.STEP_LIMIT:
            await self._client.create_agent_activity(session, "error", detail or "Stopped at the step limit.")
        elif status is RunStatus.STOPPED:
            await self._client.create_agent_activity(session, "error", detail or "Stopped.")
        else:
            await self._client.create_agent_activity(session, "error", detail or "The run failed.")
        return {}
