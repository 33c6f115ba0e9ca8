"""What a grant may do through the reverse proxy. Pure decisions, no I/O.

A read-only grant (reviewer, analyzer) may clone, fetch and make read-only API calls: pushes
(``git-receive-pack``, also its ``info/refs`` advertisement) and API methods other than
GET/HEAD/OPTIONS are refused. Every grant reaches only its own repository.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from drydock.credentials import Grant

GIT_ENDPOINTS = frozenset({"info/refs", "git-upload-pack", "git-receive-pack"})
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_API_REPOSITORY = re.compile(r"^repos/(?P<owner>[^/]+)/(?P<name>[^/?]+)")


@dataclass(frozen=True)
class Denial:
    """A refusal: ``reason`` is a short code for metrics and events, ``message`` is for the sandbox."""

    reason: str
    message: str


def is_push(endpoint: str, service: str | None) -> bool:
    return endpoint == "git-receive-pack" or (endpoint == "info/refs" and service == "git-receive-pack")


def git_denial(grant: Grant, repository: str, endpoint: str, service: str | None) -> Denial | None:
    """Why ``grant`` may not make this git smart-HTTP request, or ``None`` if it may."""
    if grant.repository is None:
        return Denial("no_repository", "this grant covers no repository")
    if not grant.covers(repository):
        return Denial("repository_scope", f"this grant covers {grant.repository} only, not {repository}")
    if grant.read_only and is_push(endpoint, service):
        return Denial("read_only", f"push refused: the {grant.role.value} grant is read-only")
    return None


def api_repository(path: str) -> str | None:
    """``owner/name`` when ``path`` (below the API root) addresses a repository."""
    match = _API_REPOSITORY.match(path.lstrip("/"))
    return f"{match['owner']}/{match['name']}" if match else None


def api_denial(grant: Grant, method: str, path: str) -> Denial | None:
    """Why ``grant`` may not make this code host API request, or ``None`` if it may."""
    if grant.repository is None:
        return Denial("no_repository", "this grant covers no repository")
    if any(segment in {".", ".."} for segment in path.split("/")):
        return Denial("path", "paths with . or .. segments are refused")
    repository = api_repository(path)
    if repository is not None and not grant.covers(repository):
        return Denial("repository_scope", f"this grant covers {grant.repository} only, not {repository}")
    if grant.read_only and method.upper() not in READ_METHODS:
        return Denial("read_only", f"{method.upper()} refused: the {grant.role.value} grant is read-only")
    return None
