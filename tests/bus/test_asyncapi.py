from __future__ import annotations

import json
from pathlib import Path

from drydock.bus import topology
from drydock.bus.asyncapi import asyncapi_document
from drydock.config import NatsSettings

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "asyncapi.json"


class TestAsyncApi:
    def test_committed_copy_is_current(self) -> None:
        assert json.loads(COMMITTED.read_text()) == asyncapi_document(), (
            "docs/asyncapi.json is stale: run `pdm run drydock asyncapi > docs/asyncapi.json`"
        )

    def test_every_stream_subject_is_described(self) -> None:
        addresses = {channel["address"] for channel in asyncapi_document()["channels"].values()}
        for stream in topology(NatsSettings()).streams:
            for pattern in stream.subjects or []:
                if pattern.startswith("$O."):
                    continue  # object-store buckets are storage, not bus channels
                assert any(_matches(pattern, address) for address in addresses), pattern

    def test_every_durable_consumer_is_a_receive_operation(self) -> None:
        document = asyncapi_document()
        received = {
            operation["channel"]["$ref"].rsplit("/", 1)[1]
            for operation in document["operations"].values()
            if operation["action"] == "receive"
        }
        for consumer in topology(NatsSettings()).consumers:
            assert consumer.config.durable_name in received
            assert (
                f"durable pull consumer '{consumer.config.durable_name}'"
                in (document["channels"][consumer.config.durable_name]["description"])
            )

    def test_messages_resolve_to_schemas(self) -> None:
        document = asyncapi_document()
        schemas = document["components"]["schemas"]
        for message in document["components"]["messages"].values():
            assert message["payload"]["$ref"].rsplit("/", 1)[1] in schemas


def _matches(pattern: str, address: str) -> bool:
    pattern_tokens, address_tokens = pattern.split("."), address.split(".")
    return len(pattern_tokens) == len(address_tokens) and all(
        p == a or (p == "*" and a.startswith("{")) for p, a in zip(pattern_tokens, address_tokens, strict=True)
    )
