"""Repositories and their contents: the repository, a commit, a person's permission; with the
caller's ``Authorization`` header."""

from __future__ import annotations

from typing import Any

from drydock.github.installations import Installations
from drydock.github.responses import checked


class Repositories(Installations):
    async def get_repository(self, authorization: str, full_name: str) -> dict[str, Any]:
        """The repository (``default_branch``, ``private``, …)."""
        response = await self.send(self.as_caller(authorization), "GET", f"/repos/{full_name}")
        return checked(response, f"reading {full_name}")

    async def get_commit(self, authorization: str, full_name: str, ref: str) -> dict[str, Any]:
        """A commit (``commit.author``, ``author.login``, …)."""
        response = await self.get(authorization, f"/repos/{full_name}/commits/{ref}")
        return checked(response, f"reading commit {ref} of {full_name}")

    async def collaborator_permission(self, authorization: str, full_name: str, login: str) -> str:
        """``admin``, ``maintain``, ``write``, ``triage``, ``read`` or ``none`` (GitHub's 404: no
        such person)."""
        path = f"/repos/{full_name}/collaborators/{login}/permission"
        response = await self.get(authorization, path)
        if response.status_code == 404:
            return "none"
        body = checked(response, f"reading {login}'s permission on {full_name}")
        return str(body.get("role_name") or body.get("permission") or "none")
