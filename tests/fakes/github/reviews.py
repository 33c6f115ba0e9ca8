"""Pull request reviews: the files of a pull request, reviews with inline comments, the review
comments of a pull request and their reactions, and GitHub's GraphQL for review threads.

- ``GET /repos/{owner}/{repo}/pulls/{number}/files``: tests set a pull request's files with
  :func:`set_files` (``files_from_diff`` turns ``git diff`` output into GitHub's entries).
- ``POST``/``GET /repos/{owner}/{repo}/pulls/{number}/reviews``: as GitHub, a review comment
  must point at a line of the diff (``422 Unprocessable Entity``, ``Line could not be
  resolved``); a multi-line one spans one hunk on one side.
- ``GET /repos/{owner}/{repo}/pulls/{number}/comments`` and
  ``GET /repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions``.
- ``POST /graphql``: the ``reviewThreads`` of a pull request and ``resolveReviewThread``; like
  GitHub it answers 200 with ``errors`` (``NOT_FOUND``, ``FORBIDDEN``) for refusals.

Review comments are comments of :mod:`tests.fakes.github.activity` (kind ``review_comment``), so
the reply and reaction endpoints reach them; where they sit in the diff is kept beside them.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse

from tests.fakes.github.activity import Comment, activity_of, now
from tests.fakes.github.actors import Actor, acting, require_access
from tests.fakes.github.auth import state
from tests.fakes.github.callers import bot_user
from tests.fakes.github.errors import GithubError, not_found
from tests.fakes.github.pagination import paginate
from tests.fakes.github.state import GithubState, PullRequest

router = APIRouter()

FILES_DOCS = "https://docs.github.com/rest/pulls/pulls#list-pull-requests-files"
REVIEWS_DOCS = "https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request"
LIST_REVIEWS_DOCS = "https://docs.github.com/rest/pulls/reviews#list-reviews-for-a-pull-request"
COMMENTS_DOCS = "https://docs.github.com/rest/pulls/comments#list-review-comments-on-a-pull-request"
REACTIONS_DOCS = "https://docs.github.com/rest/reactions/reactions#list-reactions-for-a-pull-request-review-comment"
GRAPHQL_DOCS = "https://docs.github.com/graphql"

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_REVIEW_STATES = {"COMMENT": "COMMENTED", "APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED"}


@dataclass
class PullFile:
    filename: str
    status: str = "modified"
    additions: int = 0
    deletions: int = 0
    patch: str | None = None
    previous_filename: str | None = None

    def lines(self) -> dict[str, dict[int, int]]:
        """Commentable line numbers per side, each mapped to its hunk's index."""
        found: dict[str, dict[int, int]] = {"RIGHT": {}, "LEFT": {}}
        hunk = -1
        old = new = 0
        for line in (self.patch or "").splitlines():
            header = _HUNK.match(line)
            if header:
                hunk += 1
                old, new = int(header.group(1)), int(header.group(3))
                continue
            if hunk < 0 or line.startswith("\\"):
                continue
            if line.startswith("+"):
                found["RIGHT"][new] = hunk
                new += 1
            elif line.startswith("-"):
                found["LEFT"][old] = hunk
                old += 1
            else:
                found["RIGHT"][new] = hunk
                found["LEFT"][old] = hunk
                old += 1
                new += 1
        return found


@dataclass
class Review:
    id: int
    repository: str
    number: int
    body: str
    state: str
    commit_id: str
    user: dict[str, Any]
    submitted_at: str = field(default_factory=now)


@dataclass
class Placement:
    """Where a review comment sits: its diff position, review and thread."""

    path: str
    line: int | None
    side: str
    start_line: int | None
    start_side: str | None
    commit_id: str
    review_id: int | None
    user: dict[str, Any]


@dataclass
class Thread:
    node_id: str
    root_comment_id: int
    resolved: bool = False
    resolved_by: str | None = None


class Reviews:
    def __init__(self, github: GithubState) -> None:
        self._github = github
        self.files: dict[tuple[str, int], list[PullFile]] = {}
        self.reviews: dict[int, Review] = {}
        self.placements: dict[int, Placement] = {}
        self.threads: dict[str, Thread] = {}

    def thread_of(self, comment_id: int) -> Thread | None:
        return next((thread for thread in self.threads.values() if thread.root_comment_id == comment_id), None)

    def add_comment(
        self, full_name: str, number: int, body: str, *, user: dict[str, Any], path: str, line: int,
        side: str = "RIGHT", start_line: int | None = None, commit_id: str = "", review_id: int | None = None,
    ) -> Comment:  # fmt: skip
        """A review comment starting a thread on ``path:line`` (what a person or a review wrote)."""
        comment = activity_of(self._github).add_comment(
            full_name, number, body, login=user["login"], kind="review_comment"
        )
        self.placements[comment.id] = Placement(
            path, line, side, start_line, side if start_line else None, commit_id, review_id, user
        )
        node = f"PRRT_{comment.id}"
        self.threads[node] = Thread(node, comment.id)
        return comment


_REVIEWS: weakref.WeakKeyDictionary[GithubState, Reviews] = weakref.WeakKeyDictionary()


def reviews_of(github: GithubState) -> Reviews:
    """The review state of one fake GitHub."""
    found = _REVIEWS.get(github)
    if found is None:
        found = _REVIEWS[github] = Reviews(github)
    return found


def set_files(github: GithubState, full_name: str, number: int, files: list[PullFile]) -> None:
    """What ``GET …/pulls/{number}/files`` lists (the pull request's diff against its base)."""
    reviews_of(github).files[(full_name.lower(), number)] = list(files)


def merge(github: GithubState, full_name: str, number: int) -> None:
    """Merge a pull request (closed, with ``merged_at``)."""
    pull = github.pulls[(full_name.lower(), number)]
    pull.state = "closed"
    pull.closed_at = pull.merged_at = datetime.now(UTC).replace(microsecond=0)


def files_from_diff(diff: str) -> list[PullFile]:
    """GitHub's file entries for ``git diff`` output (``diff --git`` sections)."""
    files: list[PullFile] = []
    current: PullFile | None = None
    patch: list[str] = []

    def finish() -> None:
        if current is not None:
            current.patch = "\n".join(patch) if patch else None
            files.append(current)

    for line in diff.splitlines():
        if line.startswith("diff --git "):
            finish()
            patch = []
            names = line.removeprefix("diff --git ").split(" b/", 1)
            current = PullFile(filename=names[1] if len(names) == 2 else names[0].removeprefix("a/"))
        elif current is None:
            continue
        elif line.startswith("new file mode"):
            current.status = "added"
        elif line.startswith("deleted file mode"):
            current.status = "removed"
        elif line.startswith("rename from "):
            current.previous_filename = line.removeprefix("rename from ")
            current.status = "renamed"
        elif line.startswith(("--- ", "+++ ", "index ", "similarity index", "rename to ", "Binary files")):
            continue
        elif line.startswith("@@") or patch:
            patch.append(line)
            if line.startswith("+"):
                current.additions += 1
            elif line.startswith("-"):
                current.deletions += 1
    finish()
    return files


def _pull(github: GithubState, full_name: str, number: int, documentation: str) -> PullRequest:
    found = github.pulls.get((full_name.lower(), number))
    if found is None:
        raise not_found(documentation)
    return found


def _paged(request: Request, items: list[dict[str, Any]]) -> JSONResponse:
    page, headers = paginate(request, items)
    return JSONResponse(page, headers=headers)


def _user(login: str) -> dict[str, Any]:
    kind = "Bot" if login.endswith("[bot]") else "User"
    return {"login": login, "id": abs(hash(login)) % 10**8, "node_id": f"U_{login}", "type": kind, "site_admin": False}


def review_comment_json(comment: Comment, placement: Placement | None, base_url: str) -> dict[str, Any]:
    owner_repo = comment.repository
    user = placement.user if placement is not None and comment.in_reply_to is None else _user(comment.login)
    body: dict[str, Any] = {
        "id": comment.id,
        "node_id": f"PRRC_{comment.id}",
        "url": f"{base_url}/repos/{owner_repo}/pulls/comments/{comment.id}",
        "html_url": f"https://github.com/{owner_repo}/pull/{comment.number}#discussion_r{comment.id}",
        "pull_request_url": f"{base_url}/repos/{owner_repo}/pulls/{comment.number}",
        "body": comment.body,
        "user": user,
        "created_at": comment.created_at,
        "updated_at": comment.created_at,
        "author_association": "NONE" if user.get("type") == "Bot" else "MEMBER",
    }
    if comment.in_reply_to is not None:
        body["in_reply_to_id"] = comment.in_reply_to
    if placement is not None:
        body |= {
            "path": placement.path,
            "line": placement.line,
            "side": placement.side,
            "start_line": placement.start_line,
            "start_side": placement.start_side,
            "commit_id": placement.commit_id,
            "original_commit_id": placement.commit_id,
            "pull_request_review_id": placement.review_id,
        }
    return body


def _placement_of(reviews: Reviews, comment: Comment) -> Placement | None:
    found = reviews.placements.get(comment.id)
    if found is None and comment.in_reply_to is not None:
        return reviews.placements.get(comment.in_reply_to)
    return found


def review_json(review: Review, base_url: str) -> dict[str, Any]:
    return {
        "id": review.id,
        "node_id": f"PRR_{review.id}",
        "user": review.user,
        "body": review.body,
        "state": review.state,
        "html_url": f"https://github.com/{review.repository}/pull/{review.number}#pullrequestreview-{review.id}",
        "pull_request_url": f"{base_url}/repos/{review.repository}/pulls/{review.number}",
        "commit_id": review.commit_id,
        "submitted_at": review.submitted_at,
        "author_association": "NONE",
    }


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


@router.get("/repos/{owner}/{repo}/pulls/{number}/files")
async def list_files(
    owner: str, repo: str, number: int, request: Request, actor: Annotated[Actor, Depends(acting)]
) -> JSONResponse:
    github = state(request)
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "pull_requests", FILES_DOCS, level="read")
    _pull(github, full_name, number, FILES_DOCS)
    entries = []
    for item in reviews_of(github).files.get((full_name.lower(), number), []):
        entry: dict[str, Any] = {
            "sha": "0" * 40,
            "filename": item.filename,
            "status": item.status,
            "additions": item.additions,
            "deletions": item.deletions,
            "changes": item.additions + item.deletions,
            "blob_url": f"https://github.com/{full_name}/blob/HEAD/{item.filename}",
            "raw_url": f"https://github.com/{full_name}/raw/HEAD/{item.filename}",
            "contents_url": f"{_base(request)}/repos/{full_name}/contents/{item.filename}",
        }
        if item.patch is not None:
            entry["patch"] = item.patch
        if item.previous_filename is not None:
            entry["previous_filename"] = item.previous_filename
        entries.append(entry)
    return _paged(request, entries)


class _Unprocessable(Exception):
    """GitHub's ``422 Unprocessable Entity`` with an ``errors`` list of strings."""

    def __init__(self, *errors: str) -> None:
        super().__init__(*errors)
        self.errors = list(errors)

    def response(self) -> JSONResponse:
        body = {"message": "Unprocessable Entity", "errors": self.errors, "documentation_url": REVIEWS_DOCS}
        return JSONResponse(body | {"status": "422"}, status_code=422)


def _check_comment(files: dict[str, PullFile], comment: Any) -> tuple[str, int, str, int | None, str]:
    if not isinstance(comment, dict):
        raise GithubError(422, "Invalid request.\n\nFor 'items', is not an object.", REVIEWS_DOCS)
    path, line, body = comment.get("path"), comment.get("line"), comment.get("body")
    side = comment.get("side") or "RIGHT"
    start_line = comment.get("start_line")
    if not isinstance(path, str) or not isinstance(body, str) or not body:
        raise GithubError(422, 'Invalid request.\n\n"path" and "body" weren\'t supplied.', REVIEWS_DOCS)
    if not isinstance(line, int) or side not in {"LEFT", "RIGHT"}:
        raise GithubError(422, 'Invalid request.\n\n"line" wasn\'t supplied.', REVIEWS_DOCS)
    changed = files.get(path)
    if changed is None:
        raise _Unprocessable("Path could not be resolved")
    lines = changed.lines()[side]
    if line not in lines:
        raise _Unprocessable("Line could not be resolved")
    if start_line is not None:
        start_side = comment.get("start_side") or side
        if not isinstance(start_line, int) or start_side != side or start_line >= line:
            raise _Unprocessable("start_line must precede line on the same side")
        if start_line not in lines or lines[start_line] != lines[line]:
            raise _Unprocessable("start_line must be part of the same hunk as the line.")
        if any(number not in lines for number in range(start_line, line + 1)):
            raise _Unprocessable("Line could not be resolved")
    return path, line, side, start_line, body


@router.post("/repos/{owner}/{repo}/pulls/{number}/reviews")
async def create_review(
    owner: str,
    repo: str,
    number: int,
    request: Request,
    actor: Annotated[Actor, Depends(acting)],
    payload: Annotated[dict[str, Any] | None, Body()] = None,
) -> JSONResponse:
    github = state(request)
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "pull_requests", REVIEWS_DOCS)
    pull = _pull(github, full_name, number, REVIEWS_DOCS)
    reviews = reviews_of(github)
    request_body = payload or {}
    event = request_body.get("event")
    body = request_body.get("body") or ""
    comments = request_body.get("comments") or []
    if event is not None and event not in _REVIEW_STATES:
        raise GithubError(422, f"Invalid request.\n\n{event!r} is not a valid event.", REVIEWS_DOCS)
    files = {item.filename: item for item in reviews.files.get((full_name.lower(), number), [])}
    try:
        if event in {"COMMENT", "REQUEST_CHANGES"} and not body and not comments:
            raise _Unprocessable("Review body is required")
        checked = [_check_comment(files, comment) for comment in comments]
    except _Unprocessable as refusal:
        return refusal.response()
    review = Review(
        id=github.next_id(),
        repository=pull.repository,
        number=number,
        body=body,
        state=_REVIEW_STATES.get(event or "", "PENDING"),
        commit_id=str(request_body.get("commit_id") or pull.head_sha),
        user=actor.user,
    )
    reviews.reviews[review.id] = review
    for path, line, side, start_line, text in checked:
        reviews.add_comment(
            full_name, number, text, user=actor.user, path=path, line=line, side=side, start_line=start_line,
            commit_id=review.commit_id, review_id=review.id,
        )  # fmt: skip
    return JSONResponse(review_json(review, _base(request)))


@router.get("/repos/{owner}/{repo}/pulls/{number}/reviews")
async def list_reviews(
    owner: str, repo: str, number: int, request: Request, actor: Annotated[Actor, Depends(acting)]
) -> JSONResponse:
    github = state(request)
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "pull_requests", LIST_REVIEWS_DOCS, level="read")
    _pull(github, full_name, number, LIST_REVIEWS_DOCS)
    found = [
        review_json(review, _base(request))
        for review in sorted(reviews_of(github).reviews.values(), key=lambda r: r.id)
        if review.repository.lower() == full_name.lower() and review.number == number
    ]
    return _paged(request, found)


@router.get("/repos/{owner}/{repo}/pulls/{number}/comments")
async def list_review_comments(
    owner: str, repo: str, number: int, request: Request, actor: Annotated[Actor, Depends(acting)]
) -> JSONResponse:
    github = state(request)
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "pull_requests", COMMENTS_DOCS, level="read")
    _pull(github, full_name, number, COMMENTS_DOCS)
    reviews = reviews_of(github)
    found = [
        review_comment_json(comment, _placement_of(reviews, comment), _base(request))
        for comment in sorted(activity_of(github).comments_on(full_name, number), key=lambda c: c.id)
        if comment.kind == "review_comment"
    ]
    return _paged(request, found)


@router.get("/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions")
async def list_reactions(
    owner: str, repo: str, comment_id: int, request: Request, actor: Annotated[Actor, Depends(acting)]
) -> JSONResponse:
    github = state(request)
    full_name = f"{owner}/{repo}"
    require_access(request, actor, full_name, "pull_requests", REACTIONS_DOCS, level="read")
    activity = activity_of(github)
    comment = activity.comments.get(comment_id)
    if comment is None or comment.kind != "review_comment" or comment.repository != full_name.lower():
        raise not_found(REACTIONS_DOCS)
    found = [
        {"id": reaction.id, "node_id": f"REA_{reaction.id}", "user": _user(reaction.login), "content": reaction.content}
        for reaction in activity.reactions_to(f"review_comment:{comment_id}")
    ]
    return _paged(request, found)


def _graphql_error(kind: str, message: str, path: list[str]) -> JSONResponse:
    return JSONResponse({"data": {path[0]: None}, "errors": [{"type": kind, "path": path, "message": message}]})


@router.post("/graphql")
async def graphql(
    request: Request,
    actor: Annotated[Actor, Depends(acting)],
    payload: Annotated[dict[str, Any] | None, Body()] = None,
) -> JSONResponse:
    github = state(request)
    query = str((payload or {}).get("query") or "")
    variables = (payload or {}).get("variables") or {}
    reviews = reviews_of(github)
    if "resolveReviewThread" in query:
        thread = reviews.threads.get(str(variables.get("threadId")))
        if thread is None:
            message = f"Could not resolve to a node with the global id of '{variables.get('threadId')}'"
            return _graphql_error("NOT_FOUND", message, ["resolveReviewThread"])
        root = activity_of(github).comments[thread.root_comment_id]
        if not actor.allows(github, root.repository, "pull_requests", "write"):
            return _graphql_error("FORBIDDEN", "Resource not accessible by integration", ["resolveReviewThread"])
        thread.resolved, thread.resolved_by = True, actor.user["login"]
        return JSONResponse({"data": {"resolveReviewThread": {"thread": {"id": thread.node_id, "isResolved": True}}}})
    if "reviewThreads" in query:
        full_name = f"{variables.get('owner')}/{variables.get('name')}"
        if not actor.allows(github, full_name, "metadata", "read"):
            message = f"Could not resolve to a Repository with the name '{full_name}'."
            return _graphql_error("NOT_FOUND", message, ["repository"])
        number = int(variables.get("number") or 0)
        if github.pulls.get((full_name.lower(), number)) is None:
            return JSONResponse({"data": {"repository": {"pullRequest": None}}})
        comments = activity_of(github).comments
        nodes = [
            {
                "id": thread.node_id,
                "isResolved": thread.resolved,
                "comments": {"nodes": [{"databaseId": thread.root_comment_id}]},
            }
            for thread in reviews.threads.values()
            if comments[thread.root_comment_id].repository == full_name.lower()
            and comments[thread.root_comment_id].number == number
        ]
        return JSONResponse({"data": {"repository": {"pullRequest": {"reviewThreads": {"nodes": nodes[:100]}}}}})
    return JSONResponse(
        {"errors": [{"message": "The fake GitHub answers only reviewThreads and resolveReviewThread"}]},
        status_code=200,
    )


def human_review_comment(
    github: GithubState, full_name: str, number: int, body: str, *, login: str, path: str, line: int
) -> Comment:
    """A person's review comment on a line (what the analyzer's bootstrap learns from)."""
    return reviews_of(github).add_comment(full_name, number, body, user=_user(login), path=path, line=line)


def bot_of(github: GithubState) -> dict[str, Any]:
    """The first App's bot account."""
    return bot_user(next(iter(github.apps.values())))
