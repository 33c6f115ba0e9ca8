"""What bounds a push the proxy inspects for protected paths: its size, sent and decoded."""

from __future__ import annotations

import gzip
from pathlib import Path

import httpx
import pytest

from drydock.config import Settings
from drydock.credentials import ProxyCredentials
from drydock.roles import Role
from services.credential_proxy.server import Listening
from tests.credentials.conftest import REPOSITORY
from tests.credentials.sandbox_side import handle_for
from tests.fakes.git_server import GitServer

LIMIT = 64 * 1024


@pytest.fixture
def credential_settings(credential_settings: Settings) -> Settings:
    section = credential_settings.proxy.model_copy(update={"max_inspected_push": LIMIT})
    return credential_settings.model_copy(update={"proxy": section})


def pkt(text: bytes) -> bytes:
    return f"{len(text) + 4:04x}".encode() + text


async def _push(
    proxy: Listening,
    credentials: ProxyCredentials,
    tmp_path: Path,
    thread_id: str,
    body: bytes,
    headers: dict[str, str],
) -> httpx.Response:
    grant = await credentials.issue(
        handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=REPOSITORY
    )
    async with httpx.AsyncClient(timeout=60) as client:
        return await client.post(
            f"{proxy.url}/g/{grant.token}/git/{REPOSITORY}.git/git-receive-pack",
            content=body,
            headers={"Content-Type": "application/x-git-receive-pack-request", **headers},
        )


class TestSize:
    async def test_a_gzip_body_that_decodes_past_the_limit_is_413(
        self, proxy: Listening, credentials: ProxyCredentials, git_upstream: GitServer, tmp_path: Path, thread_id: str
    ) -> None:
        command = pkt(f"{'0' * 40} {'1' * 40} refs/heads/bomb\0report-status\n".encode()) + b"0000"
        body = gzip.compress(command + bytes(16 * LIMIT))
        assert len(body) < LIMIT
        seen = len(git_upstream.requests)
        answer = await _push(proxy, credentials, tmp_path, thread_id, body, {"Content-Encoding": "gzip"})
        assert answer.status_code == 413, answer.text
        assert "larger than the proxy inspects" in answer.text
        assert git_upstream.requests[seen:] == []
        assert list(proxy.context.mirror_root.glob("body-*")) == []
