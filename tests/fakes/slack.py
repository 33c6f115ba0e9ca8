"""A test double of the Slack Web API, and builders for Events API and interactivity payloads.

The fake serves ``POST`` (and ``GET``) ``/api/{method}`` like ``https://slack.com/api/``: arguments may come as
query parameters, a form or JSON; the bot token as ``Authorization: Bearer`` or a ``token``
argument. As Slack does, it answers HTTP 200 with ``{"ok": false, "error": ...}`` for
application errors and 429 with ``Retry-After`` when rate limited.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.fakes.loopback import LoopbackServer

TEAM = "T0DRYDOCK"
BOT_USER = "U0DRYBOT"
BOT_ID = "B0DRYBOT"
REACTION_NAMES = frozenset({"eyes", "white_check_mark", "x", "thumbsup", "+1", "rocket", "hourglass"})


_TS_SEQUENCE = itertools.count(1)


@dataclass
class PostedMessage:
    channel: str
    ts: str
    text: str
    thread_ts: str | None
    user: str
    metadata: dict[str, Any] | None = None
    blocks: list[dict[str, Any]] | None = None


@dataclass
class SlackState:
    token: str
    channels: set[str] = field(default_factory=set)
    messages: dict[tuple[str, str], PostedMessage] = field(default_factory=dict)
    reactions: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)
    statuses: dict[tuple[str, str], str] = field(default_factory=dict)
    rate_limited: set[str] = field(default_factory=set)
    """Methods answered with 429 until removed."""

    def next_ts(self) -> str:
        # One sequence for every fake in the process: like Slack's, a ts is never handed out
        # twice, so two tests in the same second never share a thread (and its inbox).
        return f"{int(time.time())}.{next(_TS_SEQUENCE) % 1_000_000:06d}"

    def add_message(self, channel: str, text: str, *, user: str = "U0HUMAN", thread_ts: str | None = None) -> str:
        """A message someone posted (the one an event is about); returns its ``ts``."""
        self.channels.add(channel)
        ts = self.next_ts()
        self.messages[(channel, ts)] = PostedMessage(channel, ts, text, thread_ts, user)
        return ts

    def replies_in(self, channel: str, thread_ts: str) -> list[PostedMessage]:
        return [m for m in self.messages.values() if m.channel == channel and m.thread_ts == thread_ts]


async def _arguments(request: Request) -> dict[str, Any]:
    found: dict[str, Any] = dict(request.query_params)
    content_type = request.headers.get("content-type", "").split(";")[0].strip()
    raw = await request.body()
    if content_type == "application/json" and raw:
        body = json.loads(raw)
        if isinstance(body, dict):
            found.update(body)
    elif content_type == "application/x-www-form-urlencoded" and raw:
        found.update(parse_qsl(raw.decode()))
    return found


def _error(error: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": error})


def create_app(slack: SlackState) -> FastAPI:
    app = FastAPI(title="Fake Slack")

    @app.api_route("/api/{method}", methods=["GET", "POST"])
    async def call(method: str, request: Request) -> JSONResponse:
        if method in slack.rate_limited:
            return JSONResponse({"ok": False, "error": "ratelimited"}, status_code=429, headers={"Retry-After": "1"})
        arguments = await _arguments(request)
        authorization = request.headers.get("authorization", "")
        token = authorization.removeprefix("Bearer ").strip() if authorization else arguments.get("token")
        if not token:
            return _error("not_authed")
        if token != slack.token:
            return _error("invalid_auth")
        handler = _METHODS.get(method)
        if handler is None:
            return JSONResponse({"ok": False, "error": "unknown_method"}, status_code=404)
        return handler(slack, arguments)

    return app


def _auth_test(slack: SlackState, arguments: dict[str, Any]) -> JSONResponse:
    return JSONResponse(
        {
            "ok": True,
            "url": "https://drydock-test.slack.com/",
            "team": "Drydock",
            "user": "drydock",
            "team_id": TEAM,
            "user_id": BOT_USER,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }
    )


def _post_message(slack: SlackState, arguments: dict[str, Any]) -> JSONResponse:
    channel = arguments.get("channel")
    if not channel:
        return _error("channel_not_found")
    if channel not in slack.channels:
        return _error("channel_not_found")
    text = arguments.get("text") or ""
    if not text and not arguments.get("blocks"):
        return _error("no_text")
    thread_ts = arguments.get("thread_ts") or None
    metadata = arguments.get("metadata")
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            return _error("invalid_metadata_format")
    if metadata is not None and not (
        isinstance(metadata, dict) and isinstance(metadata.get("event_type"), str) and "event_payload" in metadata
    ):
        return _error("invalid_metadata_schema")
    blocks = arguments.get("blocks")
    if isinstance(blocks, str):
        try:
            blocks = json.loads(blocks)
        except ValueError:
            return _error("invalid_blocks_format")
    if blocks is not None and not (
        isinstance(blocks, list) and all(isinstance(b, dict) and "type" in b for b in blocks)
    ):
        return _error("invalid_blocks")
    ts = slack.next_ts()
    posted = PostedMessage(channel, ts, text, thread_ts, BOT_USER, metadata, blocks)
    slack.messages[(channel, ts)] = posted
    return JSONResponse({"ok": True, "channel": channel, "ts": ts, "message": _message_json(posted, metadata=False)})


def _message_json(message: PostedMessage, *, metadata: bool) -> dict[str, Any]:
    found: dict[str, Any] = {"type": "message", "user": message.user, "text": message.text, "ts": message.ts}
    if message.user == BOT_USER:
        found["bot_id"] = BOT_ID
    if message.thread_ts:
        found["thread_ts"] = message.thread_ts
    if message.blocks is not None:
        found["blocks"] = message.blocks
    if metadata and message.metadata is not None:
        found["metadata"] = message.metadata
    return found


def _replies(slack: SlackState, arguments: dict[str, Any]) -> JSONResponse:
    """``conversations.replies``: the parent and its replies, oldest first, ``limit`` a page
    (``cursor`` is the ts to continue after); metadata only with ``include_all_metadata``."""
    channel, ts = arguments.get("channel"), arguments.get("ts")
    if not channel or channel not in slack.channels:
        return _error("channel_not_found")
    if not ts or (channel, ts) not in slack.messages:
        return _error("thread_not_found")
    with_metadata = str(arguments.get("include_all_metadata", "")).lower() in {"1", "true"}
    limit = max(1, min(1000, int(arguments.get("limit") or 100)))
    thread = [slack.messages[(channel, ts)], *sorted(slack.replies_in(channel, ts), key=lambda m: m.ts)]
    after = arguments.get("cursor") or ""
    rest = [m for m in thread if m.ts > after] if after else thread
    page = rest[:limit]
    more = len(rest) > limit
    return JSONResponse(
        {
            "ok": True,
            "messages": [_message_json(m, metadata=with_metadata) for m in page],
            "has_more": more,
            "response_metadata": {"next_cursor": page[-1].ts if more else ""},
        }
    )


def _add_reaction(slack: SlackState, arguments: dict[str, Any]) -> JSONResponse:
    channel, ts, name = arguments.get("channel"), arguments.get("timestamp"), arguments.get("name")
    if not name or name not in REACTION_NAMES:
        return _error("invalid_name")
    if not channel or not ts or (channel, ts) not in slack.messages:
        return _error("message_not_found")
    existing = slack.reactions.setdefault((channel, ts), [])
    if (name, BOT_USER) in existing:
        return _error("already_reacted")
    existing.append((name, BOT_USER))
    return JSONResponse({"ok": True})


def _set_status(slack: SlackState, arguments: dict[str, Any]) -> JSONResponse:
    channel, thread_ts, status = arguments.get("channel_id"), arguments.get("thread_ts"), arguments.get("status")
    if not channel or not thread_ts or status is None:
        return _error("invalid_arguments")
    if channel not in slack.channels:
        return _error("channel_not_found")
    slack.statuses[(channel, thread_ts)] = status
    return JSONResponse({"ok": True})


_METHODS = {
    "auth.test": _auth_test,
    "chat.postMessage": _post_message,
    "conversations.replies": _replies,
    "reactions.add": _add_reaction,
    "assistant.threads.setStatus": _set_status,
}


class FakeSlack(LoopbackServer):
    """``async with FakeSlack(token) as slack:`` serves the Web API at ``slack.api_url``."""

    def __init__(self, token: str = "xoxb-test-token") -> None:
        self.state = SlackState(token)
        super().__init__(create_app(self.state))

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/"


_event_ids = itertools.count(1)


def event_callback(event: dict[str, Any], *, team: str = TEAM, bot_user: str = BOT_USER) -> dict[str, Any]:
    """The Events API envelope around ``event``."""
    number = next(_event_ids)
    return {
        "token": "verification-token-unused",
        "team_id": team,
        "context_team_id": team,
        "api_app_id": "A0DRYDOCK",
        "event": event,
        "type": "event_callback",
        "event_id": f"Ev{number:08d}DRY",
        "event_time": int(time.time()),
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": team,
                "user_id": bot_user,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": f"4-eyJldCI6ImFwcF9tZW50aW9uIn0{number}",
    }


def app_mention(
    channel: str, ts: str, text: str, *, user: str = "U0HUMAN", thread_ts: str | None = None, team: str = TEAM
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "app_mention",
        "user": user,
        "text": text,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "team": team,
    }
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    return event_callback(event, team=team)


def message(
    channel: str,
    ts: str,
    text: str,
    *,
    user: str | None = "U0HUMAN",
    thread_ts: str | None = None,
    channel_type: str = "channel",
    subtype: str | None = None,
    bot_id: str | None = None,
    team: str = TEAM,
) -> dict[str, Any]:
    """A ``message`` event (``channel_type`` ``im`` for a direct message)."""
    event: dict[str, Any] = {
        "type": "message",
        "text": text,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "channel_type": channel_type,
    }
    for key, value in (("user", user), ("thread_ts", thread_ts), ("subtype", subtype), ("bot_id", bot_id)):
        if value is not None:
            event[key] = value
    return event_callback(event, team=team)


def url_verification(challenge: str) -> dict[str, Any]:
    return {"token": "verification-token-unused", "challenge": challenge, "type": "url_verification"}


def block_actions(
    channel: str,
    message_ts: str,
    action_id: str,
    value: str,
    *,
    user: str = "U0HUMAN",
    thread_ts: str | None = None,
    team: str = TEAM,
) -> dict[str, Any]:
    """A button press on a message (the ``payload`` of an interactivity request)."""
    message_body: dict[str, Any] = {"type": "message", "ts": message_ts, "text": "", "user": BOT_USER}
    if thread_ts is not None:
        message_body["thread_ts"] = thread_ts
    return {
        "type": "block_actions",
        "user": {"id": user, "username": "human", "name": "human", "team_id": team},
        "api_app_id": "A0DRYDOCK",
        "token": "verification-token-unused",
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": False},
        "trigger_id": f"{int(time.time())}.{next(_event_ids)}.abcdef0123456789",
        "team": {"id": team, "domain": "drydock-test"},
        "channel": {"id": channel, "name": "general"},
        "message": message_body,
        "actions": [
            {"action_id": action_id, "block_id": "b1", "value": value, "type": "button", "action_ts": message_ts}
        ],
    }


def message_action(
    channel: str, message_ts: str, text: str, *, user: str = "U0HUMAN", thread_ts: str | None = None, team: str = TEAM
) -> dict[str, Any]:
    """The "message" shortcut run on a message."""
    message_body: dict[str, Any] = {"type": "message", "ts": message_ts, "text": text, "user": user}
    if thread_ts is not None:
        message_body["thread_ts"] = thread_ts
    return {
        "type": "message_action",
        "callback_id": "ask_drydock",
        "trigger_id": f"{int(time.time())}.{next(_event_ids)}.fedcba9876543210",
        "message_ts": message_ts,
        "team": {"id": team, "domain": "drydock-test"},
        "channel": {"id": channel, "name": "general"},
        "user": {"id": user, "name": "human"},
        "message": message_body,
        "response_url": "https://hooks.slack.com/app/T0/1/abc",
    }
