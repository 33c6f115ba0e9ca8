"""Pull requests and reviews, with the caller's ``Authorization`` header, so that they can act
as a user (:meth:`drydock.tools.github_access.GithubAccess.as_user_or_app`) or as the App's
installation (:meth:`~drydock.github.installations.Installations.app_authorization`)."""

from __future__ import annotations

from typing import Any, Literal

from drydock.errors import OutboundFailed
from drydock.github.installations import Installations
from drydock.github.responses import checked, checked_list, error_messages

PULL_STATES = frozenset({"open", "closed", "all"})


class PullRequestExists(OutboundFailed):
    """GitHub refused to open a pull request because one is open for the same head branch."""


class Pulls(Installations):
    async def create_pull(
        self,
        authorization: str,
        full_name: str,
        *,
        title: str,
        head: str,
        base: str,
        body: str = "",
        draft: bool = False,
    ) -> dict[str, Any]:
        """Open a pull request of ``head`` into ``base``; returns it (``number``, ``html_url``, …).
        Raises :class:`PullRequestExists` when one is already open for ``head``."""
        request = {"title": title, "head": head, "base": base, "body": body, "draft": draft}
        response = await self.send(self.as_caller(authorization), "POST", f"/repos/{full_name}/pulls", request)
        doing = f"opening a pull request of {head} into {base} on {full_name}"
        exists = error_messages(response, "A pull request already exists") if response.status_code == 422 else []
        if exists:
            raise PullRequestExists(f"GitHub answered 422 {exists[0]!r} {doing}", status=422)
        return checked(response, doing)

    async def get_pull(self, authorization: str, full_name: str, number: int) -> dict[str, Any]:
        response = await self.get(authorization, f"/repos/{full_name}/pulls/{number}")
        return checked(response, f"reading pull request {full_name}#{number}")

    async def list_pulls(
        self,
        authorization: str,
        full_name: str,
        *,
        head: str | None = None,
        base: str | None = None,
        state: str = "open",
        per_page: int = 30,
    ) -> list[dict[str, Any]]:
        """The first page of pull requests; ``head`` is ``owner:branch``."""
        if state not in PULL_STATES:
            raise ValueError(f"{state!r} is not one of {sorted(PULL_STATES)}")
        params = {"state": state, "per_page": str(per_page)} | ({"head": head} if head else {})
        params |= {"base": base} if base else {}
        path = f"/repos/{full_name}/pulls"
        response = await self.send(self.as_caller(authorization), "GET", path, params=params)
        return checked_list(response, f"listing pull requests of {full_name}")

    async def update_pull(
        self, authorization: str, full_name: str, number: int, changes: dict[str, Any]
    ) -> dict[str, Any]:
        """Change ``title``, ``body``, ``state`` (open/closed) or ``base``; returns the pull request."""
        response = await self.send(
            self.as_caller(authorization), "PATCH", f"/repos/{full_name}/pulls/{number}", changes
        )
        return checked(response, f"updating pull request {full_name}#{number}")

    async def list_pull_files(self, authorization: str, full_name: str, number: int) -> list[dict[str, Any]]:
        """The files a pull request changes, with their ``patch`` (GitHub lists at most 3,000)."""
        path = f"/repos/{full_name}/pulls/{number}/files"
        return await self.listed(authorization, path, f"listing the files of {full_name}#{number}", limit=3000)

    async def list_review_comments(
        self, authorization: str, full_name: str, number: int, *, limit: int = 3000
    ) -> list[dict[str, Any]]:
        """The review comments (inline comments and their replies) of a pull request, oldest first."""
        path = f"/repos/{full_name}/pulls/{number}/comments"
        return await self.listed(authorization, path, f"listing review comments of {full_name}#{number}", limit=limit)

    async def list_reviews(
        self, authorization: str, full_name: str, number: int, *, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """The reviews of a pull request, oldest first."""
        path = f"/repos/{full_name}/pulls/{number}/reviews"
        return await self.listed(authorization, path, f"listing reviews of {full_name}#{number}", limit=limit)

    async def create_review(
        self,
        authorization: str,
        full_name: str,
        number: int,
        *,
        commit_id: str,
        body: str,
        comments: list[dict[str, Any]],
        event: Literal["COMMENT", "APPROVE", "REQUEST_CHANGES"] = "COMMENT",
    ) -> dict[str, Any]:
        """Submit one review of ``commit_id`` with inline ``comments`` (``path``, ``line``,
        ``side``, optional ``start_line``/``start_side``, ``body``); returns the review."""
        request = {"commit_id": commit_id, "body": body, "event": event, "comments": comments}
        response = await self.send(
            self.as_caller(authorization), "POST", f"/repos/{full_name}/pulls/{number}/reviews", request
        )
        return checked(response, f"submitting a review of {full_name}#{number}")

    async def reply_in_review_thread(
        self, authorization: str, full_name: str, number: int, comment_id: int, body: str
    ) -> dict[str, Any]:
        """Reply in the review thread of ``comment_id``; returns the new comment."""
        path = f"/repos/{full_name}/pulls/{number}/comments/{comment_id}/replies"
        response = await self.send(self.as_caller(authorization), "POST", path, {"body": body})
        return checked(response, f"replying to review comment {comment_id} on {full_name}#{number}")

    async def review_comment_reactions(
        self, authorization: str, full_name: str, comment_id: int
    ) -> list[dict[str, Any]]:
        """The reactions to a review comment (``content``, ``user``)."""
        path = f"/repos/{full_name}/pulls/comments/{comment_id}/reactions"
        return await self.listed(authorization, path, f"reading reactions to review comment {comment_id}", limit=500)
