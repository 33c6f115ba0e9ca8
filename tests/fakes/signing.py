"""Correctly signed webhook requests, as each source sends them.

The signatures are computed here from the sources' documentation, independently of
``drydock.channels.*.verify``, so a wrong verifier cannot agree with a wrong builder.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

GITHUB_PATH = "/webhooks/github"
SLACK_EVENTS_PATH = "/webhooks/slack/events"
SLACK_INTERACTIVITY_PATH = "/webhooks/slack/interactivity"
LINEAR_PATH = "/webhooks/linear"


@dataclass(frozen=True)
class SignedRequest:
    """A webhook request: where it goes, its headers and its exact body bytes."""

    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def delivery_id(self) -> str:
        for name in ("X-GitHub-Delivery", "Linear-Delivery"):
            if name in self.headers:
                return self.headers[name]
        return str(json.loads(self.body).get("event_id", ""))

    def with_headers(self, **changes: str | None) -> SignedRequest:
        """A copy with headers replaced (``None`` removes one); names use ``_`` for ``-``."""
        headers = dict(self.headers)
        for name, value in changes.items():
            header = name.replace("_", "-")
            found = next((key for key in headers if key.lower() == header.lower()), header)
            headers.pop(found, None)
            if value is not None:
                headers[found] = value
        return replace(self, headers=headers)

    def with_body(self, body: bytes) -> SignedRequest:
        """The same headers (and so the old signature) over another body."""
        return replace(self, body=body)


def _json(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def github(
    secret: str,
    event: str,
    payload: dict[str, Any],
    *,
    delivery_id: str | None = None,
    form: bool = False,
) -> SignedRequest:
    """A GitHub delivery: ``X-Hub-Signature-256: sha256=HMAC(secret, body)``; ``form`` sends it
    as ``application/x-www-form-urlencoded`` with a ``payload`` field, as GitHub can."""
    body = urlencode({"payload": json.dumps(payload)}).encode() if form else _json(payload)
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded" if form else "application/json",
        "User-Agent": "GitHub-Hookshot/5f3a9b1",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id or str(uuid.uuid4()),
        "X-GitHub-Hook-ID": "517355620",
        "X-GitHub-Hook-Installation-Target-Type": "integration",
        "X-Hub-Signature": "sha1=" + hmac.new(secret.encode(), body, hashlib.sha1).hexdigest(),
        "X-Hub-Signature-256": f"sha256={digest}",
    }
    return SignedRequest(GITHUB_PATH, headers, body)


def github_raw(
    secret: str, event: str, body: bytes, *, content_type: str = "application/json", delivery_id: str | None = None
) -> SignedRequest:
    """A correctly signed GitHub request over arbitrary bytes (for malformed bodies)."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": content_type,
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id or str(uuid.uuid4()),
        "X-Hub-Signature-256": f"sha256={digest}",
    }
    return SignedRequest(GITHUB_PATH, headers, body)


def _slack(secret: str, path: str, body: bytes, content_type: str, timestamp: int | None) -> SignedRequest:
    sent_at = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{sent_at}:".encode() + body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": content_type,
        "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
        "X-Slack-Request-Timestamp": sent_at,
        "X-Slack-Signature": f"v0={digest}",
    }
    return SignedRequest(path, headers, body)


def slack_raw(secret: str, path: str, body: bytes, content_type: str, *, timestamp: int | None = None) -> SignedRequest:
    """A correctly signed Slack request over arbitrary bytes to ``path``."""
    return _slack(secret, path, body, content_type, timestamp)


def slack_event(
    secret: str, payload: dict[str, Any], *, timestamp: int | None = None, retry: int | None = None
) -> SignedRequest:
    """An Events API request; ``retry`` adds Slack's retry headers."""
    request = _slack(secret, SLACK_EVENTS_PATH, _json(payload), "application/json", timestamp)
    if retry is not None:
        request = request.with_headers(X_Slack_Retry_Num=str(retry), X_Slack_Retry_Reason="http_timeout")
    return request


def slack_interaction(secret: str, payload: dict[str, Any], *, timestamp: int | None = None) -> SignedRequest:
    """An interactivity request: a form whose ``payload`` field is the JSON."""
    body = urlencode({"payload": json.dumps(payload)}).encode()
    return _slack(secret, SLACK_INTERACTIVITY_PATH, body, "application/x-www-form-urlencoded", timestamp)


def linear_raw(secret: str, body: bytes, *, delivery_id: str | None = None) -> SignedRequest:
    """A correctly signed Linear request over arbitrary bytes (no timestamp is added)."""
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "Linear-Delivery": delivery_id or str(uuid.uuid4()),
        "Linear-Signature": hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
    }
    return SignedRequest(LINEAR_PATH, headers, body)


def linear(
    secret: str,
    payload: dict[str, Any],
    *,
    delivery_id: str | None = None,
    timestamp_ms: int | None = None,
) -> SignedRequest:
    """A Linear delivery: the body carries ``webhookTimestamp`` (ms); ``Linear-Signature`` is
    the hex HMAC-SHA256 of the body."""
    signed = {**payload, "webhookTimestamp": int(time.time() * 1000) if timestamp_ms is None else timestamp_ms}
    body = _json(signed)
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": "Linear-Webhook",
        "Linear-Delivery": delivery_id or str(uuid.uuid4()),
        "Linear-Signature": hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
    }
    event = str(payload.get("type", ""))
    # A header carries only printable ASCII; a payload type that is not (as property tests
    # generate) could not be sent by any client, so it is left out of the headers.
    if event.isascii() and event.isprintable():
        headers["Linear-Event"] = event
    return SignedRequest(LINEAR_PATH, headers, body)
