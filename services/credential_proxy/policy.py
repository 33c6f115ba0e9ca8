"""What a grant may do through the reverse proxy. Pure decisions, no I/O.

A read-only grant (reviewer, analyzer) may clone, fetch and make read-only API calls: pushes
(``git-receive-pack``, also its ``info/refs`` advertisement) and API methods other than
GET/HEAD/OPTIONS are refused. Every grant reaches only its own repository.

While the grant's thread has an active autofix repair, its pushes (and the API writes that
move a branch like a push: git data, file contents, merges, branch updates) are refused until
the run reported a confidence at or above the repair's threshold (:func:`confidence_denial`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from drydock.autofix.repairs import Repair
from drydock.credentials import Grant

GIT_ENDPOINTS = frozenset({"info/refs", "git-upload-pack", "git-receive-pack"})
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_API_REPOSITORY = re.compile(r"^repos/(?P<owner>[^/]+)/(?P<name>[^/?]+)")
_API_PUSH = re.compile(
    r"^repos/[^/]+/[^/]+/(git/(refs|commits|trees|blobs|tags)|contents|merges|pulls/\d+/update-branch)(/|$)"
)
"""API writes that move a branch like a push: git data, file contents, merges, branch updates."""


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


def is_api_push(method: str, path: str) -> bool:
    """Whether an API request changes a branch the way a push does."""
    return method.upper() not in READ_METHODS and _API_PUSH.match(path.lstrip("/")) is not None


def confidence_denial(repair: Repair | None) -> Denial | None:
    """Why a push must wait during the thread's autofix repair (``repair``), or ``None`` if it may go."""
    if repair is None or repair.push_allowed:
        return None
    reported = "none is recorded" if repair.confidence is None else f"{repair.confidence:g} is recorded"
    return Denial(
        "confidence",
        f"push refused: this thread is in an autofix repair of {repair.repository}#{repair.number}, and a push needs "
        f"a confidence of at least {repair.threshold:g} ({reported}). Call report_confidence with your confidence "
        "and diagnosis first; below the threshold, explain your diagnosis on the pull request instead of pushing.",
    )
