"""The API against its own OpenAPI document: schemathesis generates requests for every operation
(valid and invalid, signed in as an administrator with the CSRF token) and none is answered
with a server error. The live event stream is left out: it never ends by itself."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import strategies
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Err

from drydock.bus import EventType
from drydock.review.guidelines import Guideline, GuidelinesStore, Provenance
from services.dashboard.threads.endpoints import STREAM_OPERATION
from tests.dashboard.conftest import Site
from tests.fakes.loopback import LoopbackServer

EXAMPLES = 30


@pytest.fixture
async def served(site: Site) -> AsyncIterator[str]:
    async with LoopbackServer(site.app) as server:
        yield server.base_url


class TestOpenApi:
    def test_the_document_describes_every_api_endpoint(self, site: Site) -> None:
        document = site.app.openapi()
        paths = set(document["paths"])
        assert {"/api/v1/me", "/api/v1/profile", "/api/v1/team", "/api/v1/repositories", "/api/v1/threads"} <= paths
        assert "/api/v1/threads/{thread_id}/events/stream" in paths
        assert not any(path.startswith(("/threads", "/profile", "/login", "/auth")) for path in paths)
        assert set(document["components"]["securitySchemes"]) == {"APIKeyCookie", "APIKeyHeader"}

    @pytest.mark.timeout(300)
    async def test_no_generated_request_gets_a_server_error(self, site: Site, served: str) -> None:
        await site.enable()
        admin = await site.sign_in("root", admin=True)
        thread_id = await site.thread(str(uuid.uuid4()), owner=admin.user_id)
        await site.emit(thread_id, EventType.STARTED)
        await GuidelinesStore(site.runtime.redis, site.runtime.keys, host="github.com").save(
            "acme/widgets", [Guideline(text="Keep it short.")], Provenance(mode="bootstrap")
        )
        schema = schemathesis.openapi.from_dict(site.app.openapi())
        cookies = {"drydock_session": admin.client.cookies["drydock_session"]}
        headers = {"X-CSRF-Token": admin.csrf}
        existing = {"thread_id": thread_id, "owner": "acme", "name": "widgets", "version": 1}

        def fuzz() -> list[str]:
            tried: list[str] = []
            with requests.Session() as session:
                for found in schema.get_all_operations():
                    if isinstance(found, Err):
                        raise found.err()
                    operation = found.ok()
                    if operation.definition.raw.get("operationId") == STREAM_OPERATION:
                        continue

                    @hypothesis.settings(
                        max_examples=EXAMPLES,
                        deadline=None,
                        database=None,
                        derandomize=True,
                        suppress_health_check=list(hypothesis.HealthCheck),
                    )
                    @hypothesis.given(case=operation.as_strategy(), known=strategies.booleans())
                    def call(case: schemathesis.Case[Any], known: bool) -> None:
                        if known and case.path_parameters:
                            # Half the cases name records that exist, to reach past the 404s.
                            for name, value in existing.items():
                                if name in case.path_parameters:
                                    case.path_parameters[name] = value
                        response = case.call(base_url=served, session=session, headers=headers, cookies=cookies)
                        case.validate_response(response, checks=[not_a_server_error])

                    call()
                    tried.append(operation.label)
            return tried

        tried = await asyncio.to_thread(fuzz)
        assert len(tried) >= 20
