"""A collaborator's permission: ``GET /repos/{owner}/{repo}/collaborators/{username}/permission``.
GitHub answers the legacy ``permission`` (admin, write, read or none; maintain counts as write,
triage as read) and the ``role_name``; someone with no role on the repository gets ``none``."""

from __future__ import annotations

import zlib
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from tests.fakes.github.actors import Actor, acting, require_access
from tests.fakes.github.auth import state
from tests.fakes.github.history import history_of

router = APIRouter()

DOCS = "https://docs.github.com/rest/collaborators/collaborators#get-repository-permissions-for-a-user"
LEGACY = {"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read"}


@router.get("/repos/{owner}/{repo}/collaborators/{username}/permission")
async def permission(
    owner: str, repo: str, username: str, request: Request, actor: Annotated[Actor, Depends(acting)]
) -> dict[str, Any]:
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "metadata", DOCS, level="read")
    role = history_of(state(request)).permissions.get((full_name.lower(), username.lower()))
    user_id = zlib.crc32(username.lower().encode())
    return {
        "permission": LEGACY.get(role or "", "none"),
        "role_name": role or "none",
        "user": {"login": username, "id": user_id, "type": "User", "site_admin": False},
    }
