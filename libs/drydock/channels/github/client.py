"""The GitHub REST and GraphQL APIs as the Drydock App: comments, reactions, check runs, org
membership, pull requests and reviews, over ``githubkit``.

Authentication: the App signs a JWT (:mod:`drydock.channels.github.app_jwt`) to mint installation
tokens, which are cached per installation until ``token_refresh_margin`` before they expire;
a 401 drops the cached token and retries once, and concurrent callers for one installation mint
once. The repository, pull request and review methods take the ``Authorization`` header from the
caller instead, so that they can act as a user
(:func:`drydock.credentials.user_tokens.github_authorization`). ``api_url`` is
``https://api.github.com`` or a GitHub Enterprise Server's ``https://HOST/api/v3``. One HTTP
connection pool per client.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import httpx
from githubkit import BaseAuthStrategy, GitHub, Response, TokenAuthStrategy
from githubkit.exception import GraphQLFailed, RequestError, RequestFailed

from drydock.channels.errors import ChannelNotConfigured, OutboundFailed
from drydock.channels.github.app_jwt import AppBearer
from drydock.config import GithubSettings

if TYPE_CHECKING:
    from githubkit import GitHubCore

API_VERSION = "2022-11-28"
USER_AGENT = "drydock"

ReactionTarget = Literal["issue_comment", "review_comment", "issue"]
REACTIONS = frozenset({"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"})
PULL_STATES = frozenset({"open", "closed", "all"})

# githubkit's typed methods default to the newest REST version, which GitHub Enterprise Server
# releases may not support yet.
VERSION_HEADER = {"X-GitHub-Api-Version": API_VERSION}


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


@dataclass
class _Authorization(BaseAuthStrategy):
    """Send ``Authorization: header()`` on every request: the App's JWT (githubkit's
    ``AppAuthStrategy`` needs PyJWT, which is not installed) or a caller's header verbatim."""

    header: Callable[[], str]

    def get_auth_flow(self, github: GitHubCore[Any]) -> httpx.Auth:
        return _HeaderAuth(self.header)


class _HeaderAuth(httpx.Auth):
    def __init__(self, header: Callable[[], str]) -> None:
        self._header = header

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self._header()
        yield request


class _Pooled(httpx.AsyncBaseTransport):
    """githubkit opens and closes an ``httpx`` client for every request made outside
    ``async with``: each would build its own SSL context and pool (githubkit#285), and closing it
    closes the transport it was given. This transport sends through one long-lived client."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._client.send(request, stream=True)


class PullRequestExists(OutboundFailed):
    """GitHub refused to open a pull request because one is open for the same head branch."""


class GithubClient:
    def __init__(self, settings: GithubSettings, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        if settings.app_id is None or settings.private_key is None:
            raise ChannelNotConfigured("GitHub App not configured: set DRYDOCK_GITHUB_APP_ID and _PRIVATE_KEY")
        app = AppBearer(settings.app_id, settings.private_key.get_secret_value())
        self._margin = settings.token_refresh_margin.total_seconds()
        self._api_url = settings.api_url.rstrip("/")
        self._http = httpx.AsyncClient(transport=transport)
        self._github = GitHub(
            _Authorization(app.header),
            base_url=self._api_url,
            user_agent=USER_AGENT,
            timeout=settings.request_timeout,
            async_transport=_Pooled(self._http),
            # A 302 from the membership check means "not a member"; following it would ask
            # about public membership instead.
            follow_redirects=False,
            http_cache=False,
            # Retrying a POST that GitHub may have carried out could comment twice; callers retry.
            auto_retry=False,
        )
        self._tokens: dict[int, tuple[str, float]] = {}
        self._minting: dict[int, asyncio.Lock] = {}
        self._installations: dict[str, int] = {}
        """Installation ids by ``owner/name`` or ``org:name``; an optimization, they rarely change."""

    async def aclose(self) -> None:
        await self._http.aclose()

    # Authentication

    async def _answer(self, request: Awaitable[Response[Any, Any]]) -> httpx.Response:
        """GitHub's response, whatever its status; :class:`OutboundFailed` if GitHub is unreachable."""
        try:
            return (await request).raw_response
        except RequestFailed as failed:
            return failed.response.raw_response
        except RequestError as error:
            raise self._unreachable(error) from None

    def _unreachable(self, error: RequestError[Exception]) -> OutboundFailed:
        return OutboundFailed(f"GitHub at {self._api_url} unreachable: {error.exc or type(error.exc).__name__}")

    def _as_caller(self, authorization: str) -> GitHub[_Authorization]:
        return self._github.with_auth(_Authorization(lambda: authorization))

    async def _send(
        self,
        github: GitHub[Any],
        method: str,
        path: str,
        json: Any = None,
        params: dict[str, str] | None = None,
    ) -> httpx.Response:
        return await self._answer(github.arequest(method, path, json=json, params=params, headers=VERSION_HEADER))

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
            response = await self._answer(
                self._github.rest.apps.async_create_installation_access_token(installation_id, headers=VERSION_HEADER)
            )
            body = _checked(response, f"minting a token for installation {installation_id}")
            expires = datetime.fromisoformat(str(body["expires_at"]).replace("Z", "+00:00")).timestamp()
            self._tokens[installation_id] = (str(body["token"]), expires)
            return str(body["token"])

    async def installation_for(self, full_name: str) -> int:
        """The App's installation on ``owner/name`` (cached: it rarely changes)."""
        found = self._installations.get(full_name.lower())
        if found is not None:
            return found
        owner, _, name = full_name.partition("/")
        response = await self._answer(
            self._github.rest.apps.async_get_repo_installation(owner, name, headers=VERSION_HEADER)
        )
        installation_id = int(_checked(response, f"looking up the App's installation on {full_name}")["id"])
        self._installations[full_name.lower()] = installation_id
        return installation_id

    async def org_installation(self, org: str) -> int | None:
        """The App's installation on an organization; ``None`` if it is not installed there."""
        found = self._installations.get(f"org:{org.lower()}")
        if found is not None:
            return found
        response = await self._answer(self._github.rest.apps.async_get_org_installation(org, headers=VERSION_HEADER))
        if response.status_code == 404:
            return None
        installation_id = int(_checked(response, f"looking up the App's installation on {org}")["id"])
        self._installations[f"org:{org.lower()}"] = installation_id
        return installation_id

    async def _as_installation(
        self,
        installation_id: int | None,
        full_name: str | None,
        method: str,
        path: str,
        json: Any = None,
        params: dict[str, str] | None = None,
    ) -> httpx.Response:
        if installation_id is None:
            if full_name is None:
                raise ValueError("an installation id or a repository is required")
            installation_id = await self.installation_for(full_name)
        token = TokenAuthStrategy(await self.installation_token(installation_id))
        response = await self._send(self._github.with_auth(token), method, path, json, params)
        if response.status_code == 401:
            self._tokens.pop(installation_id, None)
            token = TokenAuthStrategy(await self.installation_token(installation_id))
            response = await self._send(self._github.with_auth(token), method, path, json, params)
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

    async def list_comments(
        self, installation_id: int | None, full_name: str, number: int, *, limit: int = 3000
    ) -> list[dict[str, Any]]:
        """The comments on an issue or pull request, oldest first, at most ``limit``."""
        doing = f"listing the comments on {full_name}#{number}"
        found: list[dict[str, Any]] = []
        page = 1
        while len(found) < limit:
            params = {"per_page": "100", "page": str(page)}
            path = f"/repos/{full_name}/issues/{number}/comments"
            batch = _checked_list(
                await self._as_installation(installation_id, full_name, "GET", path, None, params), doing
            )
            found += batch
            if len(batch) < 100:
                break
            page += 1
        return found[:limit]

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
        response = await self._send(self._as_caller(authorization), "GET", f"/repos/{full_name}")
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
        response = await self._send(self._as_caller(authorization), "POST", f"/repos/{full_name}/pulls", request)
        doing = f"opening a pull request of {head} into {base} on {full_name}"
        exists = _error_messages(response, "A pull request already exists") if response.status_code == 422 else []
        if exists:
            raise PullRequestExists(f"GitHub answered 422 {exists[0]!r} {doing}", status=422)
        return _checked(response, doing)

    async def get_pull(self, authorization: str, full_name: str, number: int) -> dict[str, Any]:
        response = await self._send(self._as_caller(authorization), "GET", f"/repos/{full_name}/pulls/{number}")
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
        path = f"/repos/{full_name}/pulls"
        response = await self._send(self._as_caller(authorization), "GET", path, params=params)
        return _checked_list(response, f"listing pull requests of {full_name}")

    async def update_pull(
        self, authorization: str, full_name: str, number: int, changes: dict[str, Any]
    ) -> dict[str, Any]:
        """Change ``title``, ``body``, ``state`` (open/closed) or ``base``; returns the pull request."""
        response = await self._send(
            self._as_caller(authorization), "PATCH", f"/repos/{full_name}/pulls/{number}", changes
        )
        return _checked(response, f"updating pull request {full_name}#{number}")

    # Reviews, with the caller's authorization

    async def _pages(self, authorization: str, path: str, doing: str, *, limit: int) -> list[dict[str, Any]]:
        """Every item of a paginated list (100 a page), at most ``limit``."""
        github = self._as_caller(authorization)
        found: list[dict[str, Any]] = []
        page = 1
        while len(found) < limit:
            params = {"per_page": "100", "page": str(page)}
            batch = _checked_list(await self._send(github, "GET", path, params=params), doing)
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
        response = await self._send(
            self._as_caller(authorization), "POST", f"/repos/{full_name}/pulls/{number}/reviews", request
        )
        return _checked(response, f"submitting a review of {full_name}#{number}")

    async def reply_in_review_thread(
        self, authorization: str, full_name: str, number: int, comment_id: int, body: str
    ) -> dict[str, Any]:
        """Reply in the review thread of ``comment_id``; returns the new comment."""
        path = f"/repos/{full_name}/pulls/{number}/comments/{comment_id}/replies"
        response = await self._send(self._as_caller(authorization), "POST", path, {"body": body})
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
        """The ``data`` of a GraphQL request (sent to :attr:`graphql_url`); :class:`OutboundFailed`
        for HTTP or GraphQL errors (GraphQL answers 200 with ``errors``; ``FORBIDDEN`` maps to 403,
        ``NOT_FOUND`` to 404)."""
        try:
            return await self._as_caller(authorization).async_graphql(query, variables)
        except GraphQLFailed as failed:
            errors = [{"type": error.type, "message": error.message} for error in failed.response.errors or []]
            raise _graphql_failure(errors, doing) from None
        except RequestFailed as failed:
            # A rate limit answers 200 with ``errors``, which githubkit raises as a request failure.
            response = failed.response.raw_response
            body = _json(response)
            if response.is_success and isinstance(body, dict):
                raise _graphql_failure(body.get("errors"), doing) from None
            raise _failure(response, body, doing) from None
        except RequestError as error:
            raise self._unreachable(error) from None
        except ValueError:
            raise OutboundFailed(f"GitHub answered neither data nor errors {doing}", status=502) from None

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


def _graphql_failure(errors: Any, doing: str) -> OutboundFailed:
    """The first of a GraphQL answer's ``errors``, with the HTTP status its ``type`` stands for."""
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
    status = {"FORBIDDEN": 403, "NOT_FOUND": 404}.get(str(first.get("type")), 422)
    return OutboundFailed(f"GitHub answered {first.get('message')!r} {doing}", status=status)


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
