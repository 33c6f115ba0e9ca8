"""Slack Events API and interactivity requests → intents.

Triggers: an app mention, a direct message, and the "message" shortcut. Thread replies without
a mention are follow-ups: they continue a thread the agent is part of and never start one. A
channel message that mentions the bot arrives twice (``app_mention`` and ``message``); only the
``app_mention`` is routed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.channels.errors import MalformedDelivery
from drydock.channels.intents import Delivery, Message, Sender
from drydock.channels.payload import (
    Object,
    account_id,
    form_payload,
    load_json,
    obj,
    optional_obj,
    optional_string,
    string,
)
from drydock.channels.slack.conversation import SlackConversation

RETRY_HEADER = "x-slack-retry-num"
_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_TS = re.compile(r"\d{1,12}\.\d{1,9}")
ROUTED_SUBTYPES = frozenset({"file_share", "thread_broadcast"})


def _content_type(headers: Mapping[str, str]) -> str:
    return headers.get("content-type", "").split(";")[0].strip().lower()


def _id(parent: Object, key: str) -> str:
    value = string(parent, key)
    if not _ID.fullmatch(value):
        raise MalformedDelivery(f"'{key}' is not a Slack id")
    return value


def _ts(parent: Object, key: str) -> str:
    value = string(parent, key)
    if not _TS.fullmatch(value):
        raise MalformedDelivery(f"'{key}' is not a Slack timestamp")
    return value


def _optional_ts(parent: Object, key: str) -> str | None:
    return _ts(parent, key) if parent.get(key) is not None else None


def _bot_user_id(payload: Object, configured: str | None) -> str | None:
    authorizations = payload.get("authorizations")
    if isinstance(authorizations, list):
        for authorization in authorizations:
            if isinstance(authorization, dict) and authorization.get("is_bot") is True:
                user = authorization.get("user_id")
                if isinstance(user, str) and user:
                    return user
    return configured


@dataclass(frozen=True)
class _Where:
    delivery_id: str
    team: str
    channel: str
    ts: str
    thread_ts: str | None


def _message(
    where: _Where, *, event: str, user: str, text: str, addressed: bool, follow_up_only: bool = False
) -> Message:
    team, channel, ts = where.team, where.channel, where.ts
    root = where.thread_ts or ts
    return Message(
        delivery_id=where.delivery_id,
        event=event,
        conversation=SlackConversation(team, channel, root),
        sender=Sender(Channel.SLACK, user, user),
        text=text,
        reply_to=ReplyAddress(channel=Channel.SLACK, address={"team": team, "channel": channel, "thread_ts": root}),
        addressed=addressed,
        references={"slack_team": team, "slack_channel": channel, "slack_ts": ts, "slack_thread_ts": root},
        follow_up_only=follow_up_only,
    )


def parse_event(headers: Mapping[str, str], body: bytes, *, bot_user_id: str | None = None) -> Delivery:
    """Parse a verified Events API request (``url_verification`` or ``event_callback``)."""
    if _content_type(headers) != "application/json":
        raise MalformedDelivery("Slack events must be application/json")
    payload = load_json(body)
    kind = string(payload, "type")
    if kind == "url_verification":
        return Delivery(Channel.SLACK, "url_verification", kind, challenge=string(payload, "challenge"))
    if kind != "event_callback":
        return Delivery(Channel.SLACK, "-", kind, ignored=f"request type {kind!r} is not routed")
    delivery_id = _id(payload, "event_id")
    team = _id(payload, "team_id")
    event = obj(payload, "event")
    event_type = string(event, "type")

    def ignored(reason: str) -> Delivery:
        return Delivery(Channel.SLACK, delivery_id, event_type, ignored=reason)

    if event_type not in {"app_mention", "message"}:
        return ignored(f"event {event_type!r} is not routed")
    bot = _bot_user_id(payload, bot_user_id)
    subtype = optional_string(event, "subtype")
    user = optional_string(event, "user")
    if event.get("bot_id") or subtype == "bot_message" or user is None or user == bot:
        return ignored("message from a bot or the agent itself")
    if subtype is not None and subtype not in ROUTED_SUBTYPES:
        return ignored(f"message subtype {subtype!r} is not routed")
    user = account_id(user, "event.user")
    channel, ts = _id(event, "channel"), _ts(event, "ts")
    thread_ts = _optional_ts(event, "thread_ts")
    text = optional_string(event, "text") or ""
    common = _Where(delivery_id, team, channel, ts, thread_ts)
    if event_type == "app_mention":
        return Delivery(
            Channel.SLACK,
            delivery_id,
            event_type,
            intents=(_message(common, event="app_mention", user=user, text=text, addressed=True),),
        )
    if event.get("channel_type") == "im":
        return Delivery(
            Channel.SLACK,
            delivery_id,
            event_type,
            intents=(_message(common, event="message.im", user=user, text=text, addressed=True),),
        )
    if bot is not None and f"<@{bot}>" in text:
        return ignored("a channel message mentioning the bot is routed as its app_mention")
    if thread_ts is None:
        return ignored("a channel message outside a thread that does not mention the bot")
    follow_up = _message(common, event="message.thread", user=user, text=text, addressed=False, follow_up_only=True)
    return Delivery(Channel.SLACK, delivery_id, event_type, intents=(follow_up,))


def _action_text(action: Object) -> str:
    value = optional_string(action, "value")
    if value is None:
        selected = optional_obj(action, "selected_option")
        value = optional_string(selected, "value") if selected else None
    return f"[pressed {string(action, 'action_id')}] {value or ''}".strip()


def parse_interaction(headers: Mapping[str, str], body: bytes) -> Delivery:
    """Parse a verified interactivity request (a form with a JSON ``payload``): button presses in
    a thread continue it; the message shortcut starts a thread on that message."""
    if _content_type(headers) != "application/x-www-form-urlencoded":
        raise MalformedDelivery("Slack interactivity requests must be application/x-www-form-urlencoded")
    payload = form_payload(body)
    kind = string(payload, "type")
    if kind not in {"block_actions", "message_action"}:
        return Delivery(Channel.SLACK, "-", kind, ignored=f"interaction {kind!r} is not routed")
    delivery_id = _id(payload, "trigger_id")
    team = _id(obj(payload, "team"), "id")
    user = _id(obj(payload, "user"), "id")
    channel = _id(obj(payload, "channel"), "id")
    message = obj(payload, "message")
    ts, thread_ts = _ts(message, "ts"), _optional_ts(message, "thread_ts")
    common = _Where(delivery_id, team, channel, ts, thread_ts)
    if kind == "message_action":
        text = optional_string(message, "text") or ""
        intent = _message(common, event="message_action", user=user, text=text, addressed=True)
        return Delivery(Channel.SLACK, delivery_id, kind, intents=(intent,))
    actions = payload.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], dict):
        raise MalformedDelivery("'actions' is missing or empty")
    intent = _message(
        common,
        event="block_actions",
        user=user,
        text=_action_text(actions[0]),
        addressed=True,
        follow_up_only=True,
    )
    return Delivery(Channel.SLACK, delivery_id, kind, intents=(intent,))
