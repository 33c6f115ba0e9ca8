"""One mapping of GitHub's answers to results and errors: the JSON of a success, or
:class:`~drydock.errors.OutboundFailed` with GitHub's status and message."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from drydock.errors import OutboundFailed


@dataclass(frozen=True)
class Answer:
    """GitHub's answer as the lean read path receives it: status, body, the ``next`` link."""

    status_code: int
    content: bytes
    next_url: str | None = None

    @classmethod
    def of(cls, response: httpx.Response | Answer) -> Answer:
        if isinstance(response, Answer):
            return response
        next_url = response.links.get("next", {}).get("url")
        return cls(response.status_code, response.content, next_url)

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300


Received = httpx.Response | Answer


def json_body(response: Received) -> Any:
    """The answer's JSON (``{}`` when empty), or ``None`` when it is not JSON."""
    try:
        return json.loads(response.content) if response.content else {}
    except ValueError:
        return None


def error_messages(response: Received, prefix: str = "") -> list[str]:
    """The ``errors`` of a validation failure, as text (a message, or the field and code)."""
    body = json_body(response)
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


def failure(response: Received, doing: str) -> OutboundFailed:
    """GitHub's refusal, with its status, its message and the details of a validation failure."""
    body = json_body(response)
    message = body.get("message") if isinstance(body, dict) else response.content[:200].decode(errors="replace")
    details = error_messages(response)
    if details:
        message = f"{message}: {'; '.join(details)}"
    return OutboundFailed(f"GitHub answered {response.status_code} {message!r} {doing}", status=response.status_code)


def graphql_failure(errors: Any, doing: str) -> OutboundFailed:
    """The first of a GraphQL answer's ``errors``, with the HTTP status its ``type`` stands for."""
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
    status = {"FORBIDDEN": 403, "NOT_FOUND": 404}.get(str(first.get("type")), 422)
    return OutboundFailed(f"GitHub answered {first.get('message')!r} {doing}", status=status)


def checked(response: Received, doing: str) -> dict[str, Any]:
    """The JSON object of a successful response; :class:`OutboundFailed` with GitHub's message otherwise."""
    body = json_body(response)
    if response.is_success and isinstance(body, dict):
        return body
    raise failure(response, doing)


def checked_list(response: Received, doing: str, field: str | None = None) -> list[dict[str, Any]]:
    """The objects of a successful response's JSON array (or of the array named ``field`` in
    its object), as :func:`checked` does for objects."""
    body = json_body(response)
    items = body.get(field) if field is not None and isinstance(body, dict) else body
    if response.is_success and isinstance(items, list):
        return [item for item in items if isinstance(item, dict)]
    raise failure(response, doing)
