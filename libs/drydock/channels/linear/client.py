"""Linear's GraphQL API (``https://api.linear.app/graphql``) over httpx: fetch an issue with
its comments, comment, emit agent activities, and move an issue to another workflow state.
One connection pool per client.

Authentication is the ``Authorization`` header as Linear expects it: a personal API key as is,
an OAuth access token as ``Bearer <token>`` (configure it with the prefix).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import httpx

from drydock.channels.errors import ChannelNotConfigured, OutboundFailed
from drydock.config import LinearSettings
from drydock.errors import describe

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


VIEWER_QUERY = "query Viewer { viewer { id } }"

ISSUE_STATES_QUERY = """
query IssueStates($id: String!) {
  issue(id: $id) {
    id identifier
    state { id name type }
    team { id key states { nodes { id name type position } } }
  }
}
"""

ISSUE_UPDATE = """
mutation IssueUpdate($id: String!, $input: IssueUpdateInput!) {
  issueUpdate(id: $id, input: $input) { success issue { id identifier state { id name type } } }
}
"""


@dataclass(frozen=True)
class WorkflowState:
    """A column of a team's workflow; ``type`` is Linear's category (``backlog``, ``unstarted``,
    ``started``, ``completed``, ``canceled``, ``triage``)."""

    id: str
    name: str
    type: str


@dataclass(frozen=True)
class IssueStates:
    """An issue's workflow state and the states its team offers, in the team's order."""

    issue_id: str
    identifier: str
    current: WorkflowState | None
    available: tuple[WorkflowState, ...]


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
            raise OutboundFailed(f"Linear unreachable {doing}: {describe(error)}") from None
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

    async def viewer_id(self) -> str:
        """The id of the Linear user this client acts as (the API key's owner or the OAuth app's user)."""
        viewer = (await self._execute(VIEWER_QUERY, {}, "asking who the API key is")).get("viewer")
        if not isinstance(viewer, dict) or not isinstance(viewer.get("id"), str) or not viewer["id"]:
            raise OutboundFailed("Linear answered without the viewer's id")
        return str(viewer["id"])

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

    async def issue_states(self, issue_id: str) -> IssueStates:
        """The issue's state and the workflow states of its team."""
        data = await self._execute(ISSUE_STATES_QUERY, {"id": issue_id}, f"reading the states of issue {issue_id}")
        issue = data.get("issue")
        if not isinstance(issue, dict):
            raise OutboundFailed(f"Linear has no issue {issue_id}")
        nodes = ((issue.get("team") or {}).get("states") or {}).get("nodes") or []
        ordered = sorted(nodes, key=lambda node: float(node.get("position") or 0))
        return IssueStates(
            issue_id=issue["id"],
            identifier=issue.get("identifier") or "",
            current=_state(issue.get("state")),
            available=tuple(state for state in map(_state, ordered) if state is not None),
        )

    async def update_issue_state(self, issue_id: str, state_id: str) -> WorkflowState:
        """Move the issue to the workflow state ``state_id``; returns the state it is in now."""
        data = await self._execute(
            ISSUE_UPDATE, {"id": issue_id, "input": {"stateId": state_id}}, f"changing the state of issue {issue_id}"
        )
        result = data.get("issueUpdate")
        issue = result.get("issue") if isinstance(result, dict) and result.get("success") else None
        state = _state(issue.get("state")) if isinstance(issue, dict) else None
        if state is None:
            raise OutboundFailed(f"Linear issueUpdate did not succeed for issue {issue_id}")
        return state

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


def _state(node: object) -> WorkflowState | None:
    if not isinstance(node, dict) or not node.get("id"):
        return None
    return WorkflowState(id=str(node["id"]), name=str(node.get("name") or ""), type=str(node.get("type") or ""))
