"""Check runs: created and updated as the App's installation, listed with the caller's
authorization."""

from __future__ import annotations

from typing import Any

from drydock.github.installations import Installations
from drydock.github.responses import checked


def _output(title: str, summary: str) -> dict[str, Any]:
    return {"output": {"title": title, "summary": summary or title}} if title else {}


class Checks(Installations):
    async def create_check_run(
        self,
        installation_id: int | None,
        full_name: str,
        *,
        name: str,
        head_sha: str,
        status: str,
        conclusion: str | None = None,
        title: str = "",
        summary: str = "",
        details_url: str | None = None,
    ) -> int:
        """Create a check run on ``head_sha``; returns its id."""
        request: dict[str, Any] = {"name": name, "head_sha": head_sha, "status": status} | _output(title, summary)
        if conclusion is not None:
            request["conclusion"] = conclusion
        if details_url:
            request["details_url"] = details_url
        response = await self.as_installation(
            installation_id, full_name, "POST", f"/repos/{full_name}/check-runs", request
        )
        return int(checked(response, f"creating check run {name!r} on {full_name}")["id"])

    async def update_check_run(
        self,
        installation_id: int | None,
        full_name: str,
        check_run_id: int,
        *,
        status: str,
        conclusion: str | None = None,
        title: str = "",
        summary: str = "",
    ) -> None:
        request: dict[str, Any] = {"status": status} | _output(title, summary)
        if conclusion is not None:
            request["conclusion"] = conclusion
        response = await self.as_installation(
            installation_id, full_name, "PATCH", f"/repos/{full_name}/check-runs/{check_run_id}", request
        )
        checked(response, f"updating check run {check_run_id} on {full_name}")

    async def list_check_runs(
        self, authorization: str, full_name: str, ref: str, *, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """The latest check run of each name on ``ref`` (a sha or a branch), at most ``limit``."""
        path = f"/repos/{full_name}/commits/{ref}/check-runs"
        doing = f"listing the check runs of {ref} on {full_name}"
        return await self.listed(
            authorization, path, doing, limit=limit, field="check_runs", params={"filter": "latest"}
        )
