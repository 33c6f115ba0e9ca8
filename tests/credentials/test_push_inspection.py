"""Reading a receive-pack request's commands (:mod:`services.credential_proxy.push_inspection`):
the ref updates and capabilities, push options skipped, git's probe of a large push (a lone
flush), and malformed bodies refused with a reason."""

from __future__ import annotations

import pytest

from services.credential_proxy.push_inspection import MalformedPush, parse_request

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
