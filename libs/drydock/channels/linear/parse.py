"""Linear webhooks → intents.

Triggers: a comment that mentions the handle (or continues an issue the agent works on), and
agent sessions: ``created`` when the agent is mentioned or delegated an issue, ``prompted`` when
the user writes to it again. The agent's own comments never trigger.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.channels.errors import MalformedDelivery
from drydock.channels.intents import Delivery, Message, Sender
from drydock.channels.linear.conversation import LinearConversation
from drydock.channels.payload import (
    Object,
    account_id,
    delivery_id,
    load_json,
    obj,
    optional_obj,
    optional_string,
    optional_time,
    string,
)

DELIVERY_HEADER = "linear-delivery"
EVENT_HEADER = "linear-event"


def delivery_of(headers: Mapping[str, str], body: bytes) -> str:
    """``Linear-Delivery``; a digest of the body when the header is absent (a redelivery of
    the same event carries the same body)."""
    value = headers.get(DELIVERY_HEADER)
    if value is None:
        return "sha256-" + hashlib.sha256(body).hexdigest()[:40]
    return delivery_id(value, "Linear-Delivery header")


def _issue_title(issue: Object | None) -> str:
    if issue is None:
        return ""
    identifier, title = optional_string(issue, "identifier"), optional_string(issue, "title")
    return " ".join(part for part in (identifier, title) if part)


def _references(organization: str, issue_id: str, issue: Object | None, **extra: str) -> dict[str, str]:
    found = {"linear_organization": organization, "linear_issue_id": issue_id, **extra}
    if issue is not None:
        for key, name in (("identifier", "linear_issue_identifier"), ("url", "url")):
            value = optional_string(issue, key)
            if value:
                found[name] = value
    return found


def _comment(payload: Object, delivery: str, organization: str, agent_user_id: str | None) -> Delivery:
    action = optional_string(payload, "action")
    if action != "create":
        return Delivery(Channel.LINEAR, delivery, "Comment", ignored=f"Comment action {action!r} is not routed")
    data = obj(payload, "data")
    if data.get("botActor") is not None:
        return Delivery(Channel.LINEAR, delivery, "Comment", ignored="comment by an application")
    issue = optional_obj(data, "issue")
    issue_id = optional_string(data, "issueId") or (optional_string(issue, "id") if issue else None)
    if not issue_id:
        return Delivery(Channel.LINEAR, delivery, "Comment", ignored="comment outside an issue")
    user = optional_obj(data, "user") or optional_obj(payload, "actor") or {}
    user_id = optional_string(data, "userId") or optional_string(user, "id")
    if not user_id:
        raise MalformedDelivery("comment has neither 'userId' nor a user")
    user_id = account_id(user_id, "data.userId" if data.get("userId") else "data.user.id")
    if user_id == agent_user_id:
        return Delivery(Channel.LINEAR, delivery, "Comment", ignored="the agent's own comment")
    comment_id = string(data, "id")
    thread_root = optional_string(data, "parentId") or comment_id
    message = Message(
        delivery_id=delivery,
        event="Comment.create",
        conversation=LinearConversation(organization, issue_id),
        sender=Sender(Channel.LINEAR, user_id, optional_string(user, "name") or user_id),
        text=optional_string(data, "body") or "",
        reply_to=ReplyAddress(
            channel=Channel.LINEAR,
            address={"organization": organization, "issue_id": issue_id, "parent_comment_id": thread_root},
        ),
        references=_references(organization, issue_id, issue, linear_comment_id=comment_id),
        written_at=optional_time(data, "createdAt"),
    )
    return Delivery(Channel.LINEAR, delivery, "Comment", intents=(message,), identity=f"Comment.create:{comment_id}")


def _prompt_of(payload: Object, action: str, session: Object) -> tuple[str, str | None]:
    """The text and the author's id of an agent session event."""
    if action == "prompted":
        activity = obj(payload, "agentActivity")
        content = optional_obj(activity, "content") or {}
        text = optional_string(activity, "body") or optional_string(content, "body") or ""
        return text, optional_string(activity, "userId")
    comment = optional_obj(session, "comment")
    text = optional_string(payload, "promptContext") or (optional_string(comment, "body") if comment else None) or ""
    if not text:
        text = _issue_title(optional_obj(session, "issue"))
    creator = optional_obj(session, "creator")
    return text, optional_string(session, "creatorId") or (optional_string(creator, "id") if creator else None)


def _comment_body(session: Object) -> str | None:
    comment = optional_obj(session, "comment")
    return optional_string(comment, "body") if comment else None


def _agent_session(payload: Object, delivery: str, organization: str) -> Delivery:
    action = optional_string(payload, "action") or ""
    if action not in {"created", "prompted"}:
        return Delivery(
            Channel.LINEAR, delivery, "AgentSessionEvent", ignored=f"agent session action {action!r} is not routed"
        )
    session = obj(payload, "agentSession")
    session_id = string(session, "id")
    issue = optional_obj(session, "issue")
    issue_id = optional_string(session, "issueId") or (optional_string(issue, "id") if issue else None)
    if not issue_id:
        return Delivery(Channel.LINEAR, delivery, "AgentSessionEvent", ignored="agent session outside an issue")
    text, author = _prompt_of(payload, action, session)
    if not author:
        raise MalformedDelivery("agent session event names no author")
    author = account_id(author, "agentActivity.userId" if action == "prompted" else "agentSession.creatorId")
    creator = optional_obj(session, "creator") or {}
    name = optional_string(creator, "name") if author == optional_string(creator, "id") else None
    event = f"AgentSessionEvent.{action}"
    # A session is created once; each prompt in it is an activity of its own.
    written: Object = session
    identity: str | None = f"{event}:{session_id}"
    if action == "prompted":
        written = obj(payload, "agentActivity")
        activity_id = optional_string(written, "id")
        identity = f"{event}:{activity_id}" if activity_id else None
    message = Message(
        delivery_id=delivery,
        event=event,
        conversation=LinearConversation(organization, issue_id),
        sender=Sender(Channel.LINEAR, author, name or author),
        text=text,
        reply_to=ReplyAddress(
            channel=Channel.LINEAR,
            address={"organization": organization, "issue_id": issue_id, "agent_session_id": session_id},
        ),
        addressed=True,
        references=_references(organization, issue_id, issue, linear_agent_session_id=session_id),
        own_words=_comment_body(session) if action == "created" else None,
        written_at=optional_time(written, "createdAt"),
    )
    return Delivery(Channel.LINEAR, delivery, "AgentSessionEvent", intents=(message,), identity=identity)


def parse(headers: Mapping[str, str], body: bytes, *, agent_user_id: str | None = None) -> Delivery:
    """Parse a verified delivery (see :mod:`drydock.channels.linear.verify`)."""
    if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise MalformedDelivery("Linear webhooks must be application/json")
    payload = load_json(body)
    delivery = delivery_of(headers, body)
    kind = string(payload, "type")
    organization = string(payload, "organizationId")
    if kind == "Comment":
        return _comment(payload, delivery, organization, agent_user_id)
    if kind == "AgentSessionEvent":
        return _agent_session(payload, delivery, organization)
    return Delivery(Channel.LINEAR, delivery, kind, ignored=f"event {kind!r} is not routed")
