"""An AsyncAPI 3.0 description of the bus, generated from the envelope models.

``drydock asyncapi`` prints it; ``docs/asyncapi.json`` is its committed copy, and a test keeps
the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

import drydock
from drydock.bus import streams
from drydock.bus.envelopes import GithubEvent, InboxMessage, RunEvent, Wake


@dataclass(frozen=True)
class ChannelSpec:
    id: str
    address: str
    stream: str
    message: type[BaseModel]
    description: str
    parameters: dict[str, str]


CHANNELS = (
    ChannelSpec(
        "inbox",
        "drydock.inbox.{thread_id}",
        streams.INBOX_STREAM,
        InboxMessage,
        "Every inbound message of a thread, in order. Nats-Msg-Id: '{thread_id}:{delivery_id}'.",
        {"thread_id": "The thread's id (uuid)."},
    ),
    ChannelSpec(
        "runs",
        "drydock.run.{role}.{thread_id}",
        streams.RUNS_STREAM,
        Wake,
        "Wake this thread: a work queue with one durable pull consumer per role ('run-{role}').",
        {"role": "coder, reviewer or analyzer.", "thread_id": "The thread's id (uuid)."},
    ),
    ChannelSpec(
        "events",
        "drydock.event.{thread_id}.{type}",
        streams.EVENTS_STREAM,
        RunEvent,
        "What a run did; read by the dashboard and status indicators. The autofix controller reads run "
        "endings (durable consumer 'autofix-runs') and records its decisions here (type 'autofix').",
        {"thread_id": "The thread's id (uuid).", "type": "The event type."},
    ),
    ChannelSpec(
        "github",
        "drydock.github.{event}",
        streams.GITHUB_STREAM,
        GithubEvent,
        "CI and pull-request events for the autofix controller (durable consumer 'autofix').",
        {"event": "The GitHub event name (X-GitHub-Event)."},
    ),
)


def asyncapi_document() -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    for spec in CHANNELS:
        schema = spec.message.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        name = spec.message.__name__
        schemas[name] = schema
        channels[spec.id] = {
            "address": spec.address,
            "description": f"{spec.description} Stream: {spec.stream}.",
            "parameters": {key: {"description": text} for key, text in spec.parameters.items()},
            "messages": {name: {"$ref": f"#/components/messages/{name}"}},
        }
        operations[f"publish_{spec.id}"] = {
            "action": "send",
            "channel": {"$ref": f"#/channels/{spec.id}"},
        }
    return {
        "asyncapi": "3.0.0",
        "info": {"title": "Drydock bus", "version": drydock.__version__},
        "defaultContentType": "application/json",
        "channels": channels,
        "operations": operations,
        "components": {
            "schemas": dict(sorted(schemas.items())),
            "messages": {
                spec.message.__name__: {
                    "name": spec.message.__name__,
                    "payload": {"$ref": f"#/components/schemas/{spec.message.__name__}"},
                }
                for spec in CHANNELS
            },
        },
    }
