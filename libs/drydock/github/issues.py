"""Issues and comments, with reactions: as the App's installation (``installation_id``, or the
one on the repository when ``None``)."""

from __future__ import annotations

from typing import Any, Literal

import httpx

from drydock.github.installations import Installations
from drydock.github.pagination import pages
from drydock.github.responses import checked

ReactionTarget = Literal["issue_comment", "review_comment", "issue"]
REACTIONS = frozenset({"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"})


class Issues(Installations):
    async def create_comment(self, installation_id: int | None, full_name: str, number: int, body: str) -> int:
        """Comment on an issue or pull request; returns the comment id."""
        return int((await self.post_comment(installation_id, full_name, number, body))["id"])

    async def post_comment(self, installation_id: int | None, full_name: str, number: int, body: str) -> dict[str, Any]:
        """Comment on an issue or pull request; returns GitHub's comment (``id``, ``html_url``, …)."""
        response = await self.as_installation(
            installation_id, full_name, "POST", f"/repos/{full_name}/issues/{number}/comments", {"body": body}
        )
        return checked(response, f"commenting on {full_name}#{number}")

    async def list_comments(
        self, installation_id: int | None, full_name: str, number: int, *, limit: int = 3000
    ) -> list[dict[str, Any]]:
        """The comments on an issue or pull request, oldest first, at most ``limit``."""

        async def fetch(url: str, params: dict[str, str] | None) -> httpx.Response:
            return await self.as_installation(installation_id, full_name, "GET", url, None, params)

        path = f"/repos/{full_name}/issues/{number}/comments"
        return await pages(fetch, path, f"listing the comments on {full_name}#{number}", limit=limit)

    async def reply_to_review_comment(
        self, installation_id: int | None, full_name: str, number: int, comment_id: int, body: str
    ) -> int:
        """Reply in a pull request review comment's thread; returns the comment id."""
        path = f"/repos/{full_name}/pulls/{number}/comments/{comment_id}/replies"
        response = await self.as_installation(installation_id, full_name, "POST", path, {"body": body})
        return int(checked(response, f"replying to review comment {comment_id} on {full_name}#{number}")["id"])

    async def react(
        self, installation_id: int | None, full_name: str, target: ReactionTarget, target_id: int, content: str = "eyes"
    ) -> None:
        """Add a reaction (idempotent: GitHub answers 200 when it already exists)."""
        if content not in REACTIONS:
            raise ValueError(f"{content!r} is not a GitHub reaction")
        paths = {
            "issue_comment": f"/repos/{full_name}/issues/comments/{target_id}/reactions",
            "review_comment": f"/repos/{full_name}/pulls/comments/{target_id}/reactions",
            "issue": f"/repos/{full_name}/issues/{target_id}/reactions",
        }
        response = await self.as_installation(installation_id, full_name, "POST", paths[target], {"content": content})
        checked(response, f"reacting to {target} {target_id} on {full_name}")
