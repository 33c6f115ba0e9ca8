"""The code host's REST API through the proxy, as a sandbox client would call it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from drydock.bus import Bus, EventType, RunEvent
from drydock.bus.streams import EVENTS_STREAM
from drydock.credentials import ProxyCredentials, digest
from drydock.roles import Role
from drydock.sandbox.credentials import SandboxGrant
from tests.credentials.conftest import OTHER_REPOSITORY, REPOSITORY
from tests.credentials.sandbox_side import handle_for
from tests.fakes.github import FakeGithub, SeenRequest


async def _grant(credentials: ProxyCredentials, thread_id: str, tmp_path: Path, role: Role) -> SandboxGrant:
    return await credentials.issue(
        handle_for(thread_id, tmp_path), thread_id=thread_id, role=role, repository=REPOSITORY
    )


def _client(grant: SandboxGrant) -> httpx.AsyncClient:
    """A client as the sandbox has it: the API base URL, and only the placeholder as its token."""
    assert grant.api_base_url is not None
    return httpx.AsyncClient(
        base_url=grant.api_base_url,
        headers={"Authorization": f"token {grant.environment['GH_TOKEN']}"},
        trust_env=False,
    )


class TestReads:
    @pytest.mark.parametrize("role", [Role.CODER, Role.REVIEWER])
    async def test_get_repository_with_the_injected_token(
        self, credentials: ProxyCredentials, github: FakeGithub, tmp_path: Path, thread_id: str, role: Role
    ) -> None:
        grant = await _grant(credentials, thread_id, tmp_path, role)
        assert grant.token is not None
        async with _client(grant) as client:
            response = await client.get(f"/repos/{REPOSITORY}")
        assert response.status_code == 200, response.text
        assert response.json()["full_name"] == REPOSITORY
        upstream = await credentials.vault.get(digest(grant.token))
        assert upstream is not None
        assert github.requests[-1] == SeenRequest("GET", f"/repos/{REPOSITORY}", f"Bearer {upstream.token}")

    async def test_another_repository_is_refused_with_github_s_error_shape(
        self, credentials: ProxyCredentials, tmp_path: Path, thread_id: str
    ) -> None:
        grant = await _grant(credentials, thread_id, tmp_path, Role.CODER)
        async with _client(grant) as client:
            response = await client.get(f"/repos/{OTHER_REPOSITORY}")
        assert response.status_code == 403
        assert f"covers {REPOSITORY} only" in response.json()["message"]
        assert "documentation_url" in response.json()

    async def test_dot_segments_cannot_escape_the_scope(
        self, credentials: ProxyCredentials, tmp_path: Path, thread_id: str
    ) -> None:
        grant = await _grant(credentials, thread_id, tmp_path, Role.CODER)
        async with _client(grant) as client:
            response = await client.send(
                client.build_request("GET", f"{grant.api_base_url}/repos/{REPOSITORY}/../../{OTHER_REPOSITORY}")
            )
        assert response.status_code == 403


class TestGrantInThePath:
    @pytest.mark.parametrize(
        ("spelled", "as_issued"), [("/g/%64gr_", "/g/dgr_"), ("/%61pi", "/api"), ("/%67/dgr_", "/g/dgr_")]
    )
    async def test_a_percent_encoded_prefix_is_refused_and_nothing_with_the_grant_reaches_github(
        self,
        credentials: ProxyCredentials,
        github: FakeGithub,
        tmp_path: Path,
        thread_id: str,
        spelled: str,
        as_issued: str,
    ) -> None:
        grant = await _grant(credentials, thread_id, tmp_path, Role.CODER)
        assert grant.token is not None
        assert grant.api_base_url is not None
        url = f"{grant.api_base_url.replace(as_issued, spelled, 1)}/repos/{REPOSITORY}"
        seen = len(github.requests)
        async with _client(grant) as client:
            response = await client.send(client.build_request("GET", url))
        assert [r for r in github.requests[seen:] if grant.token in r.path or "/g/" in r.path] == []
        assert response.status_code == 400
        assert "without percent-encoding" in response.json()["message"]


class TestWrites:
    async def test_reviewer_write_is_refused_and_recorded(
        self, credentials: ProxyCredentials, bus: Bus, tmp_path: Path, thread_id: str
    ) -> None:
        grant = await _grant(credentials, thread_id, tmp_path, Role.REVIEWER)
        async with _client(grant) as client:
            response = await client.post(f"/repos/{REPOSITORY}/issues/1/comments", json={"body": "LGTM"})
        assert response.status_code == 403
        assert "POST refused: the reviewer grant is read-only" in response.json()["message"]
        stored = await bus.js.get_last_msg(EVENTS_STREAM, f"drydock.event.{thread_id}.{EventType.PROXY_DENIED}")
        assert stored.data is not None
        event = RunEvent.model_validate_json(stored.data)
        assert event.data["route"] == "api"
        assert event.data["method"] == "POST"
        assert event.data["target"] == f"/repos/{REPOSITORY}/issues/1/comments"

    async def test_coder_write_is_forwarded_with_the_token(
        self, credentials: ProxyCredentials, github: FakeGithub, tmp_path: Path, thread_id: str
    ) -> None:
        grant = await _grant(credentials, thread_id, tmp_path, Role.CODER)
        assert grant.token is not None
        async with _client(grant) as client:
            response = await client.request("PATCH", f"/repos/{REPOSITORY}", json={"description": "x"})
        assert "drydock credential proxy" not in response.text
        upstream = await credentials.vault.get(digest(grant.token))
        assert upstream is not None
        assert SeenRequest("PATCH", f"/repos/{REPOSITORY}", f"Bearer {upstream.token}") in github.requests


class TestUnusableGrant:
    async def test_revoked_grant_is_401_with_a_clear_message(
        self, credentials: ProxyCredentials, tmp_path: Path, thread_id: str
    ) -> None:
        grant = await _grant(credentials, thread_id, tmp_path, Role.CODER)
        await credentials.revoke(grant)
        async with _client(grant) as client:
            response = await client.get(f"/repos/{REPOSITORY}")
        assert response.status_code == 401
        assert "credential-proxy grant revoked" in response.json()["message"]
