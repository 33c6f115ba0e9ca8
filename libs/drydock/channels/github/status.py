"""The run's status on GitHub: a "Drydock" check run on the pull request's head commit.

Issues have no commit, so they show no status. The check run's id is returned for the caller to
keep in the reply address, so later states update the same check run.
"""

from __future__ import annotations

from drydock.bus.envelopes import ReplyAddress
from drydock.channels.run_status import RunStatus
from drydock.github import GithubClient

CHECK_NAME = "Drydock"

_CONCLUSIONS = {
    RunStatus.FINISHED: ("success", "Finished"),
    RunStatus.STEP_LIMIT: ("neutral", "Stopped at the step limit"),
    RunStatus.STOPPED: ("cancelled", "Stopped"),
    RunStatus.FAILED: ("failure", "Failed"),
}


class GithubStatus:
    def __init__(self, client: GithubClient) -> None:
        self._client = client

    async def show(self, address: ReplyAddress, status: RunStatus, detail: str = "") -> dict[str, str]:
        """Show ``status``; returns the address fields to keep (``check_run_id``)."""
        where = address.address
        head_sha = where.get("head_sha")
        if not head_sha:
            return {}
        installation = int(where["installation_id"]) if where.get("installation_id") else None
        full_name = where["repository"]
        check_run_id = where.get("check_run_id")
        if status is RunStatus.WORKING:
            if check_run_id:
                await self._client.update_check_run(
                    installation, full_name, int(check_run_id), status="in_progress", title="Working", summary=detail
                )
                return {}
            created = await self._client.create_check_run(
                installation,
                full_name,
                name=CHECK_NAME,
                head_sha=head_sha,
                status="in_progress",
                title="Working",
                summary=detail,
            )
            return {"check_run_id": str(created)}
        conclusion, title = _CONCLUSIONS[status]
        if check_run_id:
            await self._client.update_check_run(
                installation,
                full_name,
                int(check_run_id),
                status="completed",
                conclusion=conclusion,
                title=title,
                summary=detail,
            )
            return {}
        created = await self._client.create_check_run(
            installation,
            full_name,
            name=CHECK_NAME,
            head_sha=head_sha,
            status="completed",
            conclusion=conclusion,
            title=title,
            summary=detail,
        )
        return {"check_run_id": str(created)}
