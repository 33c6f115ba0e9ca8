"""The GitHub REST API as the Drydock App: comments, reactions, check runs, org membership,
and pull requests.

Authentication: the App signs a JWT (:mod:`drydock.credentials.app_jwt`) to mint installation
tokens, which are cached per installation until ``token_refresh_margin`` before they expire;
a 401 drops the cached token and retries once. The repository and pull request methods take
the ``Authorization`` header from the caller instead, so that they can act as a user
(:func:`drydock.credentials.user_tokens.github_authorization`). ``api_url`` is
``https://api.github.com`` or a GitHub Enterprise Server's ``https://HOST/api/v3``. One HTTP
connection pool per client.

(``githubkit`` 0.16 cannot be imported next to ``hishel`` 2.0, the version locked today, so
this client speaks REST over ``httpx`` directly.)
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any, Literal

import httpx

from drydock.channels.errors import ChannelNotConfigured, OutboundFailed
from drydock.config import GithubSettings
from drydock.credentials.app_jwt import AppBearer

API_VERSION = "2022-11-28"
USER_AGENT = "drydock"

ReactionTarget = Literal["issue_comment", "review_comment", "issue"]
REACTIONS = frozenset({"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"})
PULL_STATES = frozenset({"open", "closed", "all"})


REVIEW_THREADS_QUERY = """
query ReviewThreads($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100) {
        nodes { id isResolved comments(first: 1) { nodes { databaseId } } }
      }
    }
  }
}
"""
RESOLVE_THREAD_MUTATION = """
mutation ResolveReviewThread($threadId: ID!) {
  resolveReviewThread(input: {threadId: $threadId}) { thread { id isResolved } }
}
"""


class PullRequestExists(OutboundFailed):
    """GitHub refused to open a pull request because one is open for the same head branch."""


class GithubClient:
    def __init__(self, settings: GithubSettings, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        if settings.app_id is None or settings.private_key is None:
            raise ChannelNotConfigured("GitHub App not configured: set DRYDOCK_GITHUB_APP_ID and _PRIVATE_KEY")
        self._app = AppBearer(settings.app_id, settings.private_key.get_secret_value())
        self._margin = settings.token_refresh_margin.total_seconds()
        self._api_url = settings.api_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self._api_url,
            timeout=settings.request_timeout,
            transport=transport,
            headers={
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": USER_AGENT,
            },
        )
        self._tokens: dict[int, tuple[str, float]] = {}
        self._minting: dict[int, asyncio.Lock] = {}
        self._installations: dict[str, int] = {}
        """Installation ids by ``owner/name`` or ``org:name``; an optimization, they rarely change."""

    async def aclose(self) -> None:
        await self._http.aclose()

    # Authentication

    async def _send(self, method: str, path: str, authorization: str, json: Any = None) -> httpx.Response:
        try:
            return await self._http.request(method, path, json=json, headers={"Authorization": authorization})
        except httpx.HTTPError as error:
            raise OutboundFailed(f"GitHub at {self._api_url} unreachable: {error or type(error).__name__}") from None

    async def _as_app(self, method: str, path: str, json: Any = None) -> httpx.Response:
        return await self._send(method, path, self._app.header(), json)

    async def installation_token(self, installation_id: int) -> str:
        """A cached installation token, minted anew shortly before the old one expires."""
        cached = self._tokens.get(installation_id)
        if cached is not None and cached[1] - time.time() > self._margin:
            return cached[0]
        lock = self._minting.setdefault(installation_id, asyncio.Lock())
        async with lock:
            cached = self._tokens.get(installation_id)
            if cached is not None and cached[1] - time.time() > self._margin:
                return cached[0]
            response = await self._as_app("POST", f"/app/installations/{installation_id}/access_tokens")
            body = _checked(response, f"minting a token for installation {installation_id}")
            expires = datetime.fromisoformat(str(body["expires_at"]).replace("Z", "+00:00")).timestamp()
            self._tokens[installation_id] = (str(body["token"]), expires)
            return str(body["token"])

    async def installation_for(self, full_name: str) -> int:
        """The App's installation on ``owner/name`` (cached: it rarely changes)."""
        found = self._installations.get(full_name.lower())
        if found is not None:
            return found
        response = await self._as_app("GET", f"/repos/{full_name}/installation")
        installation_id = int(_checked(response, f"looking up the App's installation on {full_name}")["id"])
        self._installations[full_name.lower()] = installation_id
        return installation_id

    async def org_installation(self, org: str) -> int | None:
        """The App's installation on an organization; ``None`` if it is not installed there."""
        found = self._installations.get(f"org:{org.lower()}")
        if found is not None:
            return found
        response = await self._as_app("GET", f"/orgs/{org}/installation")
        if response.status_code == 404:
            return None
        installation_id = int(_checked(response, f"looking up the App's installation on {org}")["id"])
        self._installations[f"org:{org.lower()}"] = installation_id
        return installation_id

    async def _as_installation(
        self, installation_id: int | None, full_name: str | None, method: str, path: str, json: Any = None
    ) -> httpx.Response:
        if installation_id is None:
            if full_name is None:
                raise ValueError("an installation id or a repository is required")
            installation_id = await self.installation_for(full_name)
        response = await self._send(method, path, f"token {await self.installation_token(installation_id)}", json)
        if response.status_code == 401:
            self._tokens.pop(installation_id, None)
            response = await self._send(method, path, f"token {await self.installation_token(installation_id)}", json)
        return response

    # Conversation

    async def create_comment(self, installation_id: int | None, full_name: str, number: int, body: str) -> int:
        """Comment on an issue or pull request; returns the comment id."""
        response = await self._as_installation(
            installation_id, full_name, "POST", f"/repos/{full_name}/issues/{number}/comments", {"body": body}
        )
        return int(_checked(response, f"commenting on {full_name}#{number}")["id"])

    async def post_comment(self, installation_id: int | None, full_name: str, number: int, body: str) -> dict[str, Any]:
        """Comment on an issue or pull request; returns GitHub's comment (``id``, ``html_url``, …)."""
        response = await self._as_installation(
            installation_id, full_name, "POST", f"/repos/{full_name}/issues/{number}/comments", {"body": body}
        )
        return _checked(response, f"commenting on {full_name}#{number}")

    async def reply_to_review_comment(
        self, installation_id: int | None, full_name: str, number: int, comment_id: int, body: str
    ) -> int:
        """Reply in a pull request review comment's thread; returns the comment id."""
        path = f"/repos/{full_name}/pulls/{number}/comments/{comment_id}/replies"
        response = await self._as_installation(installation_id, full_name, "POST", path, {"body": body})
        return int(_checked(response, f"replying to review comment {comment_id} on {full_name}#{number}")["id"])

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
        response = await self._as_installation(installation_id, full_name, "POST", paths[target], {"content": content})
        _checked(response, f"reacting to {target} {target_id} on {full_name}")

    # Checks

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
        request: dict[str, Any] = {"name": name, "head_sha": head_sha, "status": status}
        if conclusion is not None:
            request["conclusion"] = conclusion
        if title:
            request["output"] = {"title": title, "summary": summary or title}
        if details_url:
            request["details_url"] = details_url
        response = await self._as_installation(
            installation_id, full_name, "POST", f"/repos/{full_name}/check-runs", request
        )
        return int(_checked(response, f"creating check run {name!r} on {full_name}")["id"])

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
        request: dict[str, Any] = {"status": status}
        if conclusion is not None:
            request["conclusion"] = conclusion
        if title:
            request["output"] = {"title": title, "summary": summary or title}
        response = await self._as_installation(
            installation_id, full_name, "PATCH", f"/repos/{full_name}/check-runs/{check_run_id}", request
        )
        _checked(response, f"updating check run {check_run_id} on {full_name}")

    # Repositories and pull requests, with the caller's authorization

    async def get_repository(self, authorization: str, full_name: str) -> dict[str, Any]:
        """The repository (``default_branch``, ``private``, …)."""
        response = await self._send("GET", f"/repos/{full_name}", authorization)
        return _checked(response, f"reading {full_name}")

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
        response = await self._send("POST", f"/repos/{full_name}/pulls", authorization, request)
        doing = f"opening a pull request of {head} into {base} on {full_name}"
        exists = _error_messages(response, "A pull request already exists") if response.status_code == 422 else []
        if exists:
            raise PullRequestExists(f"GitHub answered 422 {exists[0]!r} {doing}", status=422)
        return _checked(response, doing)

    async def get_pull(self, authorization: str, full_name: str, number: int) -> dict[str, Any]:
        response = await self._send("GET", f"/repos/{full_name}/pulls/{number}", authorization)
        return _checked(response, f"reading pull request {full_name}#{number}")

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
        path = httpx.URL(f"/repos/{full_name}/pulls", params=params)
        response = await self._send("GET", str(path), authorization)
        return _checked_list(response, f"listing pull requests of {full_name}")

    async def update_pull(
        self, authorization: str, full_name: str, number: int, changes: dict[str, Any]
    ) -> dict[str, Any]:
        """Change ``title``, ``body``, ``state`` (open/closed) or ``base``; returns the pull request."""
        response = await self._send("PATCH", f"/repos/{full_name}/pulls/{number}", authorization, changes)
        return _checked(response, f"updating pull request {full_name}#{number}")

    # Reviews, with the caller's authorization

    async def _pages(self, authorization: str, path: str, doing: str, *, limit: int) -> list[dict[str, Any]]:
        """Every item of a paginated list (100 a page), at most ``limit``."""
        found: list[dict[str, Any]] = []
        page = 1
        while len(found) < limit:
            url = httpx.URL(path, params={"per_page": "100", "page": str(page)})
            batch = _checked_list(await self._send("GET", str(url), authorization), doing)
            found += batch
            if len(batch) < 100:
                break
            page += 1
        return found[:limit]

    async def list_pull_files(self, authorization: str, full_name: str, number: int) -> list[dict[str, Any]]:
        """The files a pull request changes, with their ``patch`` (GitHub lists at most 3,000)."""
        path = f"/repos/{full_name}/pulls/{number}/files"
        return await self._pages(authorization, path, f"listing the files of {full_name}#{number}", limit=3000)

    async def list_review_comments(
        self, authorization: str, full_name: str, number: int, *, limit: int = 3000
    ) -> list[dict[str, Any]]:
        """The review comments (inline comments and their replies) of a pull request, oldest first."""
        path = f"/repos/{full_name}/pulls/{number}/comments"
        return await self._pages(authorization, path, f"listing review comments of {full_name}#{number}", limit=limit)

    async def list_reviews(self, authorization: str, full_name: str, number: int) -> list[dict[str, Any]]:
        """The reviews of a pull request, oldest first."""
        path = f"/repos/{full_name}/pulls/{number}/reviews"
        return await self._pages(authorization, path, f"listing reviews of {full_name}#{number}", limit=1000)

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
        response = await self._send("POST", f"/repos/{full_name}/pulls/{number}/reviews", authorization, request)
        return _checked(response, f"submitting a review of {full_name}#{number}")

    async def reply_in_review_thread(
        self, authorization: str, full_name: str, number: int, comment_id: int, body: str
    ) -> dict[str, Any]:
        """Reply in the review thread of ``comment_id``; returns the new comment."""
        path = f"/repos/{full_name}/pulls/{number}/comments/{comment_id}/replies"
        response = await self._send("POST", path, authorization, {"body": body})
        return _checked(response, f"replying to review comment {comment_id} on {full_name}#{number}")

    async def review_comment_reactions(
        self, authorization: str, full_name: str, comment_id: int
    ) -> list[dict[str, Any]]:
        """The reactions to a review comment (``content``, ``user``)."""
        path = f"/repos/{full_name}/pulls/comments/{comment_id}/reactions"
        return await self._pages(authorization, path, f"reading reactions to review comment {comment_id}", limit=500)

    @property
    def graphql_url(self) -> str:
        """GitHub's GraphQL endpoint: ``https://api.github.com/graphql``, or ``https://HOST/api/graphql``
        on GitHub Enterprise Server (whose REST root is ``https://HOST/api/v3``)."""
        if self._api_url.endswith("/api/v3"):
            return self._api_url.removesuffix("/v3") + "/graphql"
        return self._api_url + "/graphql"

    async def graphql(self, authorization: str, query: str, variables: dict[str, Any], doing: str) -> dict[str, Any]:
        """The ``data`` of a GraphQL request; :class:`OutboundFailed` for HTTP or GraphQL errors
        (GraphQL answers 200 with ``errors``; ``FORBIDDEN`` maps to 403, ``NOT_FOUND`` to 404)."""
        try:
            response = await self._http.post(
                self.graphql_url,
                json={"query": query, "variables": variables},
                headers={"Authorization": authorization},
            )
        except httpx.HTTPError as error:
            raise OutboundFailed(f"GitHub at {self._api_url} unreachable: {error or type(error).__name__}") from None
        body = _checked(response, doing)
        errors = body.get("errors")
        if errors:
            first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
            status = {"FORBIDDEN": 403, "NOT_FOUND": 404}.get(str(first.get("type")), 422)
            raise OutboundFailed(f"GitHub answered {first.get('message')!r} {doing}", status=status)
        data = body.get("data")
        return data if isinstance(data, dict) else {}

    async def review_threads(self, authorization: str, full_name: str, number: int) -> list[dict[str, Any]]:
        """The review threads of a pull request: ``id``, ``isResolved`` and the ``databaseId`` of
        their first comment (the first 100 threads)."""
        owner, _, name = full_name.partition("/")
        data = await self.graphql(
            authorization,
            REVIEW_THREADS_QUERY,
            {"owner": owner, "name": name, "number": number},
            f"listing review threads of {full_name}#{number}",
        )
        pull = ((data.get("repository") or {}).get("pullRequest")) or {}
        nodes = (pull.get("reviewThreads") or {}).get("nodes") or []
        return [node for node in nodes if isinstance(node, dict)]

    async def resolve_review_thread(self, authorization: str, thread_id: str) -> None:
        """Mark a review thread resolved (idempotent)."""
        await self.graphql(
            authorization, RESOLVE_THREAD_MUTATION, {"threadId": thread_id}, f"resolving review thread {thread_id}"
        )

    # Organizations

    async def is_org_member(self, installation_id: int, org: str, login: str) -> bool:
        """Whether ``login`` belongs to ``org`` (public or private membership, as the App sees it)."""
        response = await self._as_installation(installation_id, None, "GET", f"/orgs/{org}/members/{login}")
        if response.status_code == 204:
            return True
        if response.status_code in {302, 404}:
            return False
        _checked(response, f"checking {login}'s membership of {org}")
        return False


def _json(response: httpx.Response) -> Any:
    try:
        return response.json() if response.content else {}
    except ValueError:
        return None


def _error_messages(response: httpx.Response, prefix: str = "") -> list[str]:
    """The ``errors`` of a validation failure, as text (a message, or the field and code)."""
    body = _json(response)
    errors = body.get("errors") if isinstance(body, dict) else None
    found = []
    for error in errors if isinstance(errors, list) else []:
        if isinstance(error, dict):
            text = error.get("message") or " ".join(str(error[part]) for part in ("field", "code") if error.get(part))
        else:
            text = str(error)
        if text and str(text).startswith(prefix):
            found.append(str(text))
    return found


def _failure(response: httpx.Response, body: Any, doing: str) -> OutboundFailed:
    message = body.get("message") if isinstance(body, dict) else response.text[:200]
    details = _error_messages(response)
    if details:
        message = f"{message}: {'; '.join(details)}"
    return OutboundFailed(f"GitHub answered {response.status_code} {message!r} {doing}", status=response.status_code)


def _checked(response: httpx.Response, doing: str) -> dict[str, Any]:
    """The JSON object of a successful response; :class:`OutboundFailed` with GitHub's message otherwise."""
    body = _json(response)
    if response.is_success and isinstance(body, dict):
        return body
    raise _failure(response, body, doing)


def _checked_list(response: httpx.Response, doing: str) -> list[dict[str, Any]]:
    """The JSON array of a successful response, as :func:`_checked` does for objects."""
    body = _json(response)
    if response.is_success and isinstance(body, list):
        return [item for item in body if isinstance(item, dict)]
    raise _failure(response, body, doing)
