"""What a grant may do through the reverse proxy. Pure decisions, no I/O.

A read-only grant (reviewer, analyzer) may clone, fetch and make read-only API calls: pushes
(``git-receive-pack``, also its ``info/refs`` advertisement) and API methods other than
GET/HEAD/OPTIONS are refused. Every grant reaches only its own repository.

While the grant's thread has an active autofix repair, its pushes and its API writes are
refused until the run reported a confidence at or above the repair's threshold
(:func:`confidence_denial`); so are they under plan approval until the plan is approved. Only the
writes that change no code, the ones the agent's tools make (comments, issues, labels,
reactions, pull requests, reviews, check runs; of GraphQL mutations, resolving a review thread),
go through meanwhile (:func:`gate_applies`). Writes of files and git data (:func:`writes_files`,
:data:`FILE_MUTATIONS`) are refused where the repository has protected paths.
``/repositories/{id}/…`` paths, which name a repository by id where the grant's scope cannot see
it, are refused for every grant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from drydock.accounts import repository_name
from drydock.autofix.repairs import Repair
from drydock.credentials import Grant

GIT_ENDPOINTS = {"info/refs": "GET", "git-upload-pack": "POST", "git-receive-pack": "POST"}
"""The smart-HTTP endpoints, each with the one method git sends to it."""
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_API_REPOSITORY = re.compile(r"^repos/(?P<owner>[^/]+)/(?P<name>[^/?]+)")
_FILE_WRITES = re.compile(r"repos/[^/]+/[^/]+/(contents|git/(refs|commits|trees|blobs|tags))(/.*)?")
FILE_MUTATIONS = frozenset({"createCommitOnBranch", "createRef", "updateRef", "updateRefs", "deleteRef"})
"""The GraphQL mutations that write files or git data."""
_UNGATED_WRITES = tuple(
    (method, re.compile(rf"repos/[^/]+/[^/]+/{path}"))
    for method, path in (
        ("POST", r"issues"),
        ("PATCH", r"issues/[0-9]+"),
        ("POST", r"issues/[0-9]+/comments"),
        ("PATCH", r"issues/comments/[0-9]+"),
        ("POST", r"issues/[0-9]+/labels"),
        ("DELETE", r"issues/[0-9]+/labels/[^/]+"),
        ("POST", r"(issues|issues/comments|pulls/comments)/[0-9]+/reactions"),
        ("POST", r"pulls"),
        ("PATCH", r"pulls/[0-9]+"),
        ("POST", r"pulls/[0-9]+/(reviews|comments|comments/[0-9]+/replies)"),
        ("POST", r"check-runs"),
        ("PATCH", r"check-runs/[0-9]+"),
    )
)
"""Writes that change no code, which the agent's tools make (``drydock.github``): no gate holds them."""
UNGATED_MUTATIONS = frozenset({"resolveReviewThread"})
"""The GraphQL mutations the agent's tools make; any other waits while a gate applies."""


@dataclass(frozen=True)
class Denial:
    """A refusal: ``reason`` is a short code for metrics and events, ``message`` is for the sandbox."""

    reason: str
    message: str


def is_push(endpoint: str, service: str | None) -> bool:
    return endpoint == "git-receive-pack" or (endpoint == "info/refs" and service == "git-receive-pack")


def scope_denial(grant: Grant, repository: str) -> Denial | None:
    """Why ``owner/name``, as a request spells it, is not the grant's repository, or ``None`` if it is."""
    try:
        repository_name(repository)
    except ValueError as error:
        return Denial("repository_name", str(error))
    if not grant.covers(repository):
        return Denial("repository_scope", f"this grant covers {grant.repository} only, not {repository}")
    return None


def git_denial(grant: Grant, repository: str, endpoint: str, service: str | None) -> Denial | None:
    """Why ``grant`` may not make this git smart-HTTP request, or ``None`` if it may."""
    if grant.repository is None:
        return Denial("no_repository", "this grant covers no repository")
    if denial := scope_denial(grant, repository):
        return denial
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
    if path.lstrip("/").split("/")[0].lower() == "repositories":
        return Denial(
            "repository_id", "/repositories/{id} paths are refused: name the repository as /repos/{owner}/{name}"
        )
    repository = api_repository(path)
    if repository is not None and (denial := scope_denial(grant, repository)):
        return denial
    if grant.read_only and method.upper() not in READ_METHODS:
        return Denial("read_only", f"{method.upper()} refused: the {grant.role.value} grant is read-only")
    return None


def writes_files(method: str, path: str) -> bool:
    """Whether an API request writes files or git data (a change no proxy can hold like a push)."""
    normalized = re.sub("/+", "/", path.strip("/")).lower()
    return method.upper() not in READ_METHODS and _FILE_WRITES.fullmatch(normalized) is not None


def is_graphql(path: str) -> bool:
    return path.strip("/").lower() == "graphql"


def gate_applies(method: str, raw_path: str) -> bool:
    """Whether an API request waits for the thread's gates (plan approval, autofix confidence):
    every write but those in the agent's tools' short list, matched on the path as sent. A GraphQL
    request is judged by its mutations instead (:data:`UNGATED_MUTATIONS`)."""
    method = method.upper()
    if method in READ_METHODS:
        return False
    path = raw_path.strip("/")
    return not any(method == allowed and pattern.fullmatch(path) for allowed, pattern in _UNGATED_WRITES)


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
