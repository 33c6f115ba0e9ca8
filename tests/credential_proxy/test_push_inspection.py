"""Reading a receive-pack request's commands (:mod:`services.credential_proxy.push_inspection`):
the ref updates and capabilities, push options skipped, git's probe of a large push (a lone
flush), and malformed bodies refused with a reason."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from drydock.credentials import ProxyCredentials
from drydock.roles import Role
from services.credential_proxy.push_inspection import MalformedPush, parse_request
from services.credential_proxy.server import Listening
from tests.credentials.conftest import REPOSITORY
from tests.credentials.sandbox_side import handle_for
from tests.fakes.git_server import GitServer

OLD, NEW = "a" * 40, "b" * 40


def pkt(text: bytes) -> bytes:
    return f"{len(text) + 4:04x}".encode() + text


class TestParse:
    def test_commands_capabilities_and_the_pack(self) -> None:
        body = (
            pkt(f"{OLD} {NEW} refs/heads/x\0report-status side-band-64k\n".encode())
            + pkt(f"{'0' * 40} {NEW} refs/heads/y\n".encode())
            + b"0000PACK..."
        )
        push = parse_request(body)
        assert [(u.old, u.new, u.ref) for u in push.updates] == [
            (OLD, NEW, "refs/heads/x"),
            ("0" * 40, NEW, "refs/heads/y"),
        ]
        assert push.capabilities == {"report-status", "side-band-64k"}
        assert body[push.pack_offset :] == b"PACK..."

    def test_push_options_are_skipped(self) -> None:
        body = pkt(f"{OLD} {NEW} refs/heads/x\0push-options\n".encode()) + b"0000" + pkt(b"ci.skip\n") + b"0000PACK"
        assert body[parse_request(body).pack_offset :] == b"PACK"

    def test_the_probe_of_a_large_push_updates_nothing(self) -> None:
        assert parse_request(b"0000").updates == ()

    @pytest.mark.parametrize(
        ("body", "reason"),
        [
            (b"zzzz", "not pkt-lines"),
            (b"0010abc", "truncated"),
            (pkt(b"hello world\n") + b"0000", "not 'old new ref'"),
            (pkt(f"{OLD} nothex refs/heads/x\n".encode()) + b"0000", "not an object id"),
            (pkt(f"{OLD} {NEW} refs/heads/x\n".encode()), "ends inside"),
            (pkt(b"push-cert\0x\n") + b"0000", "signed pushes"),
        ],
    )
    def test_malformed_bodies_say_why(self, body: bytes, reason: str) -> None:
        with pytest.raises(MalformedPush, match=reason):
            parse_request(body)


class TestThroughTheProxy:
    @pytest.mark.parametrize(
        ("body", "headers", "reason"),
        [
            (b"garbage", {}, "not pkt-lines"),
            (b"\x1f\x8b\x08\x00broken", {"Content-Encoding": "gzip"}, "does not decode"),
        ],
    )
    async def test_a_malformed_push_is_400_and_never_forwarded(
        self,
        body: bytes,
        headers: dict[str, str],
        reason: str,
        proxy: Listening,
        credentials: ProxyCredentials,
        git_upstream: GitServer,
        tmp_path: Path,
        thread_id: str,
    ) -> None:
        grant = await credentials.issue(
            handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=REPOSITORY
        )
        seen = len(git_upstream.requests)
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                f"{proxy.url}/g/{grant.token}/git/{REPOSITORY}.git/git-receive-pack",
                content=body,
                headers={"Content-Type": "application/x-git-receive-pack-request", **headers},
            )
        assert answer.status_code == 400
        assert reason in answer.text
        assert git_upstream.requests[seen:] == []
