"""A test double of Linear's GraphQL API, and builders for Linear webhook payloads.

The fake serves ``POST /graphql`` with the operations Drydock uses (``issue``,
``commentCreate``, ``agentActivityCreate``, ``issueUpdate`` of the workflow state, ``viewer``).
An issue is found by its id or its identifier (``DRY-1``), as Linear finds it. It recognises an operation by its root
field and answers with the full object rather than only the selected fields (it has no
GraphQL parser); errors come in Linear's shape: HTTP 400 for authentication and validation
errors, HTTP 200 with ``errors`` for a missing entity, HTTP 429 when rate limited.
"""

from __future__ import annotations

import itertools
import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.fakes.loopback import LoopbackServer

ORGANIZATION = "3f2a6c1e-0d4b-4a7e-9b8f-linear000org"
AGENT_USER = "agent-user-0001"
ACTIVITY_TYPES = frozenset({"thought", "action", "elicitation", "response", "error", "prompt"})
WORKFLOW = (
    ("Backlog", "backlog"),
    ("Todo", "unstarted"),
    ("In Progress", "started"),
    ("In Review", "started"),
    ("Done", "completed"),
    ("Canceled", "canceled"),
)
"""The workflow states of the fake's one team, in order: Linear's defaults for a new team."""
_ROOT_FIELD = re.compile(r"^\s*(?:(query|mutation)\b[^{]*)?\{\s*(\w+)")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class LinearComment:
    id: str
    issue_id: str
    body: str
    user_id: str
    user_name: str
    parent_id: str | None = None
    created_at: str = field(default_factory=_now)


@dataclass
class WorkflowState:
    id: str
    name: str
    type: str
    position: float


@dataclass
class LinearIssue:
    id: str
    identifier: str
    title: str
    description: str = ""
    state_id: str | None = None

    @property
    def url(self) -> str:
        return f"https://linear.app/drydock/issue/{self.identifier}"


@dataclass
class AgentActivity:
    id: str
    agent_session_id: str
    type: str
    body: str


@dataclass
class LinearState:
    api_key: str
    issues: dict[str, LinearIssue] = field(default_factory=dict)
    comments: list[LinearComment] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)
    activities: list[AgentActivity] = field(default_factory=list)
    rate_limited: bool = False
    team_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    workflow_states: list[WorkflowState] = field(
        default_factory=lambda: [
            WorkflowState(str(uuid.uuid4()), name, kind, float(position))
            for position, (name, kind) in enumerate(WORKFLOW)
        ]
    )
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def add_issue(self, title: str = "Something to do", description: str = "") -> LinearIssue:
        """A new issue in the team's ``Todo`` state."""
        todo = self.state_named("Todo")
        issue = LinearIssue(str(uuid.uuid4()), f"DRY-{next(self._numbers)}", title, description, todo.id)
        self.issues[issue.id] = issue
        return issue

    def find_issue(self, key: str) -> LinearIssue | None:
        """The issue with id or identifier ``key``."""
        found = self.issues.get(key)
        if found is not None:
            return found
        return next((issue for issue in self.issues.values() if issue.identifier == key), None)

    def state_named(self, name: str) -> WorkflowState:
        return next(state for state in self.workflow_states if state.name == name)

    def state_of(self, issue: LinearIssue) -> WorkflowState | None:
        return next((state for state in self.workflow_states if state.id == issue.state_id), None)

    def add_comment(
        self, issue_id: str, body: str, *, user_id: str = "user-human-1", user_name: str = "Ada"
    ) -> LinearComment:
        comment = LinearComment(str(uuid.uuid4()), issue_id, body, user_id, user_name)
        self.comments.append(comment)
        return comment

    def add_session(self) -> str:
        session = str(uuid.uuid4())
        self.sessions.add(session)
        return session

    def comments_on(self, issue_id: str) -> list[LinearComment]:
        return [comment for comment in self.comments if comment.issue_id == issue_id]


def _errors(status: int, message: str, kind: str, code: str, path: str | None = None) -> JSONResponse:
    error: dict[str, Any] = {
        "message": message,
        "extensions": {"type": kind, "code": code, "userError": True, "userPresentableMessage": message},
    }
    if path is not None:
        error["path"] = [path]
    body: dict[str, Any] = {"errors": [error]}
    if status == 200:
        body["data"] = None
    return JSONResponse(body, status_code=status)


def _not_found(entity: str, path: str) -> JSONResponse:
    return _errors(200, f"Entity not found: {entity}", "invalid input", "INVALID_INPUT", path)


def _invalid(message: str, path: str) -> JSONResponse:
    return _errors(400, message, "invalid input", "INVALID_INPUT", path)


def _state_json(state: WorkflowState | None) -> dict[str, Any] | None:
    if state is None:
        return None
    return {"id": state.id, "name": state.name, "type": state.type, "position": state.position}


def _issue_json(linear: LinearState, issue: LinearIssue) -> dict[str, Any]:
    nodes = [
        {
            "id": comment.id,
            "body": comment.body,
            "createdAt": comment.created_at,
            "parent": {"id": comment.parent_id} if comment.parent_id else None,
            "user": {"id": comment.user_id, "name": comment.user_name},
        }
        for comment in linear.comments_on(issue.id)
    ]
    return {
        "id": issue.id,
        "identifier": issue.identifier,
        "title": issue.title,
        "description": issue.description,
        "url": issue.url,
        "comments": {"nodes": nodes},
        "state": _state_json(linear.state_of(issue)),
        "team": {
            "id": linear.team_id,
            "key": "DRY",
            "states": {"nodes": [_state_json(state) for state in linear.workflow_states]},
        },
    }


def _issue(linear: LinearState, variables: dict[str, Any]) -> JSONResponse:
    issue = linear.find_issue(str(variables.get("id")))
    if issue is None:
        return _not_found("Issue", "issue")
    return JSONResponse({"data": {"issue": _issue_json(linear, issue)}})


def _comment_create(linear: LinearState, variables: dict[str, Any]) -> JSONResponse:
    request = variables.get("input")
    if not isinstance(request, dict) or not isinstance(request.get("body"), str) or not request.get("issueId"):
        return _invalid('Variable "$input" got invalid value; issueId and body are required', "commentCreate")
    issue = linear.find_issue(str(request["issueId"]))
    if issue is None:
        return _not_found("Issue", "commentCreate")
    parent = request.get("parentId")
    if parent is not None and not any(c.id == parent and c.issue_id == issue.id for c in linear.comments):
        return _not_found("Comment", "commentCreate")
    comment = LinearComment(str(uuid.uuid4()), issue.id, request["body"], AGENT_USER, "Drydock", parent)
    linear.comments.append(comment)
    return JSONResponse({"data": {"commentCreate": {"success": True, "comment": {"id": comment.id}}}})


def _agent_activity_create(linear: LinearState, variables: dict[str, Any]) -> JSONResponse:
    request = variables.get("input")
    content = request.get("content") if isinstance(request, dict) else None
    if not isinstance(request, dict) or not isinstance(content, dict) or content.get("type") not in ACTIVITY_TYPES:
        return _invalid(
            'Variable "$input" got invalid value; agentSessionId and content.type are required', "agentActivityCreate"
        )
    session = str(request.get("agentSessionId"))
    if session not in linear.sessions:
        return _not_found("AgentSession", "agentActivityCreate")
    activity = AgentActivity(str(uuid.uuid4()), session, str(content["type"]), str(content.get("body", "")))
    linear.activities.append(activity)
    return JSONResponse({"data": {"agentActivityCreate": {"success": True, "agentActivity": {"id": activity.id}}}})


def _issue_update(linear: LinearState, variables: dict[str, Any]) -> JSONResponse:
    request = variables.get("input")
    if not isinstance(request, dict) or not variables.get("id"):
        return _invalid('Variable "$input" got invalid value; id and input are required', "issueUpdate")
    issue = linear.find_issue(str(variables["id"]))
    if issue is None:
        return _not_found("Issue", "issueUpdate")
    if "stateId" in request:
        state = next((state for state in linear.workflow_states if state.id == request["stateId"]), None)
        if state is None:
            return _not_found("WorkflowState", "issueUpdate")
        issue.state_id = state.id
    for name in ("title", "description"):
        if isinstance(request.get(name), str):
            setattr(issue, name, request[name])
    return JSONResponse({"data": {"issueUpdate": {"success": True, "issue": _issue_json(linear, issue)}}})


def _viewer(linear: LinearState, variables: dict[str, Any]) -> JSONResponse:
    return JSONResponse({"data": {"viewer": {"id": AGENT_USER, "name": "Drydock"}}})


_OPERATIONS = {
    ("query", "issue"): _issue,
    ("query", "viewer"): _viewer,
    ("mutation", "commentCreate"): _comment_create,
    ("mutation", "agentActivityCreate"): _agent_activity_create,
    ("mutation", "issueUpdate"): _issue_update,
}


def create_app(linear: LinearState) -> FastAPI:
    app = FastAPI(title="Fake Linear")

    @app.post("/graphql")
    async def graphql(request: Request) -> JSONResponse:
        if linear.rate_limited:
            return _errors(429, "Rate limit exceeded", "ratelimited", "RATELIMITED")
        if request.headers.get("authorization", "").strip() != linear.api_key:
            return _errors(
                400, "Authentication required, not authenticated", "authentication error", "AUTHENTICATION_ERROR"
            )
        try:
            body = await request.json()
        except ValueError:
            return _errors(400, "Unexpected token in JSON", "graphql error", "BAD_REQUEST")
        query = body.get("query") if isinstance(body, dict) else None
        variables = body.get("variables") or {} if isinstance(body, dict) else {}
        found = _ROOT_FIELD.match(query) if isinstance(query, str) else None
        if found is None or not isinstance(variables, dict):
            return _errors(400, "Must provide query string.", "graphql error", "GRAPHQL_PARSE_FAILED")
        kind, root = found.group(1) or "query", found.group(2)
        handler = _OPERATIONS.get((kind, root))
        if handler is None:
            type_name = "Mutation" if kind == "mutation" else "Query"
            return _errors(
                400, f'Cannot query field "{root}" on type "{type_name}".', "graphql error", "GRAPHQL_VALIDATION_FAILED"
            )
        return handler(linear, variables)

    return app


class FakeLinear(LoopbackServer):
    """``async with FakeLinear(api_key) as linear:`` serves GraphQL at ``linear.api_url``."""

    def __init__(self, api_key: str = "lin_api_test") -> None:
        self.state = LinearState(api_key)
        super().__init__(create_app(self.state))

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/graphql"


def _envelope(kind: str, action: str, organization: str) -> dict[str, Any]:
    return {
        "type": kind,
        "action": action,
        "organizationId": organization,
        "createdAt": _now(),
        "webhookId": "b7c9e3e2-webhook-0000-drydock",
        "url": "https://linear.app/drydock",
    }


def comment_created(
    issue: LinearIssue,
    body: str,
    *,
    user_id: str = "user-human-1",
    user_name: str = "Ada",
    comment_id: str | None = None,
    parent_id: str | None = None,
    organization: str = ORGANIZATION,
    bot: bool = False,
) -> dict[str, Any]:
    """A ``Comment`` ``create`` webhook."""
    payload = _envelope("Comment", "create", organization)
    data: dict[str, Any] = {
        "id": comment_id or str(uuid.uuid4()),
        "createdAt": _now(),
        "updatedAt": _now(),
        "body": body,
        "issueId": issue.id,
        "userId": user_id,
        "issue": {"id": issue.id, "identifier": issue.identifier, "title": issue.title, "url": issue.url},
        "user": {"id": user_id, "name": user_name},
    }
    if parent_id is not None:
        data["parentId"] = parent_id
    if bot:
        data["botActor"] = {"id": "app-1", "type": "oauthClient", "name": "Some App"}
    payload["data"] = data
    payload["actor"] = {"id": user_id, "name": user_name, "type": "user"}
    payload["url"] = f"{issue.url}#comment-{data['id'][:8]}"
    return payload


def agent_session_created(
    issue: LinearIssue,
    session_id: str,
    *,
    creator_id: str = "user-human-1",
    creator_name: str = "Ada",
    prompt_context: str | None = None,
    comment_body: str | None = None,
    organization: str = ORGANIZATION,
) -> dict[str, Any]:
    """An ``AgentSessionEvent`` ``created``: the agent was mentioned or delegated the issue."""
    payload = _envelope("AgentSessionEvent", "created", organization)
    session: dict[str, Any] = {
        "id": session_id,
        "createdAt": _now(),
        "status": "pending",
        "type": "commentThread",
        "appUserId": AGENT_USER,
        "creatorId": creator_id,
        "creator": {"id": creator_id, "name": creator_name, "email": "ada@example.com"},
        "issueId": issue.id,
        "issue": {
            "id": issue.id,
            "identifier": issue.identifier,
            "title": issue.title,
            "description": issue.description,
            "url": issue.url,
        },
        "organizationId": organization,
    }
    if comment_body is not None:
        session["comment"] = {"id": str(uuid.uuid4()), "body": comment_body}
    payload["agentSession"] = session
    payload["appUserId"] = AGENT_USER
    payload["oauthClientId"] = "oauth-client-drydock"
    if prompt_context is not None:
        payload["promptContext"] = prompt_context
    return payload


def agent_session_prompted(
    issue: LinearIssue,
    session_id: str,
    body: str,
    *,
    user_id: str = "user-human-1",
    organization: str = ORGANIZATION,
) -> dict[str, Any]:
    """An ``AgentSessionEvent`` ``prompted``: the user wrote to the agent again."""
    payload = agent_session_created(issue, session_id, creator_id=user_id, organization=organization)
    payload["action"] = "prompted"
    payload["agentActivity"] = {
        "id": str(uuid.uuid4()),
        "agentSessionId": session_id,
        "userId": user_id,
        "content": {"type": "prompt", "body": body},
        "createdAt": _now(),
    }
    return payload


def issue_created(issue: LinearIssue, *, organization: str = ORGANIZATION) -> dict[str, Any]:
    """An ``Issue`` ``create`` webhook (not routed by the ingress)."""
    payload = _envelope("Issue", "create", organization)
    payload["data"] = {"id": issue.id, "identifier": issue.identifier, "title": issue.title}
    return payload


def now_ms() -> int:
    return int(time.time() * 1000)
