"""Linear's GraphQL API (``https://api.linear.app/graphql``) over httpx: fetch an issue with
its comments, comment, and emit agent activities. One connection pool per client.

Authentication is the ``Authorization`` header as Linear expects it: a personal API key as is,
an OAuth access token as ``Bearer <token>`` (configure it with the prefix).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import httpx

from drydock.channels.errors import ChannelNotConfigured, OutboundFailed
from drydock.config import LinearSettings

ActivityType = Literal["thought", "action", "elicitation", "response", "error"]

ISSUE_QUERY = """
query Issue($id: String!) {
  issue(id: $id) {
    id identifier title description url
    comments(first: 100) { nodes { id body createdAt parent { id } user { id name } } }
  }
}
"""

COMMENT_CREATE = """
mutation CommentCreate($input: CommentCreateInput!) {
  commentCreate(input: $input) { success comment { id } }
}
"""

AGENT_ACTIVITY_CREATE = """
mutation AgentActivityCreate($input: AgentActivityCreateInput!) {
  agentActivityCreate(input: $input) { success agentActivity { id } }
}
"""


@dataclass(frozen=True)
class LinearComment:
    id: str
    body: str
    author_id: str | None
    author_name: str | None
    created_at: str
    parent_id: str | None


@dataclass(frozen=True)
class LinearIssue:
    id: str
    identifier: str
    title: str
    description: str
    url: str
    comments: tuple[LinearComment, ...]


class LinearClient:
    def __init__(self, settings: LinearSettings, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        if settings.api_key is None:
            raise ChannelNotConfigured("Linear not configured: set DRYDOCK_LINEAR_API_KEY")
        self._url = settings.api_url
        self._http = httpx.AsyncClient(
            timeout=settings.request_timeout,
            transport=transport,
            headers={"Authorization": settings.api_key.get_secret_value(), "Content-Type": "application/json"},
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _execute(self, query: str, variables: dict[str, Any], doing: str) -> dict[str, Any]:
        try:
            response = await self._http.post(self._url, json={"query": query, "variables": variables})
        except httpx.HTTPError as error:
            raise OutboundFailed(f"Linear unreachable {doing}: {error or type(error).__name__}") from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise OutboundFailed(
                f"Linear answered {response.status_code} without JSON {doing}", status=response.status_code
            )
        errors = body.get("errors")
        if errors or not response.is_success:
            first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
            extensions = first.get("extensions") if isinstance(first.get("extensions"), dict) else {}
            code = extensions.get("code") if isinstance(extensions, dict) else None
            raise OutboundFailed(
                f"Linear answered {response.status_code} {code or ''} {first.get('message', '')!r} {doing}".strip(),
                status=response.status_code,
            )
        data = body.get("data")
        if not isinstance(data, dict):
            raise OutboundFailed(f"Linear answered without data {doing}", status=response.status_code)
        return data

    async def issue(self, issue_id: str) -> LinearIssue:
        """The issue with its (first hundred) comments, oldest first."""
        data = await self._execute(ISSUE_QUERY, {"id": issue_id}, f"fetching issue {issue_id}")
        issue = data.get("issue")
        if not isinstance(issue, dict):
            raise OutboundFailed(f"Linear has no issue {issue_id}")
        comments = []
        for node in (issue.get("comments") or {}).get("nodes") or []:
            user, parent = node.get("user") or {}, node.get("parent") or {}
            comments.append(
                LinearComment(
                    id=node["id"],
                    body=node.get("body") or "",
                    author_id=user.get("id"),
                    author_name=user.get("name"),
                    created_at=node.get("createdAt") or "",
                    parent_id=parent.get("id"),
                )
            )
        comments.sort(key=lambda comment: comment.created_at)
        return LinearIssue(
            id=issue["id"],
            identifier=issue.get("identifier") or "",
            title=issue.get("title") or "",
            description=issue.get("description") or "",
            url=issue.get("url") or "",
            comments=tuple(comments),
        )

    async def create_comment(self, issue_id: str, body: str, *, parent_id: str | None = None) -> str:
        """Comment on the issue (in ``parent_id``'s thread if given); returns the comment id."""
        request: dict[str, Any] = {"issueId": issue_id, "body": body}
        if parent_id:
            request["parentId"] = parent_id
        data = await self._execute(COMMENT_CREATE, {"input": request}, f"commenting on issue {issue_id}")
        return str(_payload(data, "commentCreate", "comment"))

    async def create_agent_activity(self, agent_session_id: str, kind: ActivityType, body: str) -> str:
        """Emit an agent activity (a thought, response, error, …) in the agent session."""
        request = {"agentSessionId": agent_session_id, "content": {"type": kind, "body": body}}
        data = await self._execute(
            AGENT_ACTIVITY_CREATE, {"input": request}, f"emitting a {kind} in agent session {agent_session_id}"
        )
        return str(_payload(data, "agentActivityCreate", "agentActivity"))


def _payload(data: dict[str, Any], mutation: str, entity: str) -> str:
    result = data.get(mutation)
    if not isinstance(result, dict) or not result.get("success") or not isinstance(result.get(entity), dict):
        raise OutboundFailed(f"Linear {mutation} did not succeed")
    return str(result[entity]["id"])
