"""The behaviour every sandbox provider must have, written once.

A provider's test module subclasses :class:`ProviderContract` and defines two class-scoped
fixtures: ``provider`` (the provider under test) and ``other_provider`` (a second instance over
the same records, as another worker process would build it). Both must clean up every sandbox
they created. The Kubernetes provider reuses these tests unchanged.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.daemon import protocol
from drydock.sandbox.errors import SandboxNotFound, SandboxUnavailable
from drydock.sandbox.handle import Isolation
from drydock.sandbox.provider import SandboxProvider
from tests.waiting import eventually

_PROCESS_STATE = "if [ -e /proc/{pid}/stat ]; then cut -d')' -f2 /proc/{pid}/stat | cut -d' ' -f2; else echo gone; fi"


async def process_state(sandbox: SandboxBackend, pid: int) -> str:
    """A process's state letter inside the sandbox, or ``gone``."""
    return (await sandbox.run(_PROCESS_STATE.format(pid=pid))).output.strip()


class ProviderContract:
    """Tests every provider passes. Not collected itself (no ``Test`` prefix)."""

    @pytest.fixture(scope="class")
    @classmethod
    def provider(cls) -> SandboxProvider:
        raise NotImplementedError("a provider's test case defines the provider fixture")

    @pytest.fixture(scope="class")
    @classmethod
    def other_provider(cls) -> SandboxProvider:
        raise NotImplementedError("a provider's test case defines the other_provider fixture")

    @pytest.fixture(scope="class")
    @classmethod
    async def sandbox(cls, provider: SandboxProvider) -> AsyncIterator[SandboxBackend]:
        """One sandbox shared by the tests of the class that do not destroy it."""
        handle = await provider.create(f"contract-{uuid.uuid4()}")
        backend = SandboxBackend(handle)
        yield backend
        await backend.aclose()
        await provider.delete(handle.id)

    async def test_create_gives_a_healthy_sandbox_reachable_by_id(
        self, provider: SandboxProvider, other_provider: SandboxProvider
    ) -> None:
        thread_id = str(uuid.uuid4())
        handle = await provider.create(thread_id, labels={"purpose": "contract"})
        try:
            assert (handle.thread_id, handle.provider, handle.labels["purpose"]) == (
                thread_id,
                provider.name,
                "contract",
            )
            assert handle.token
            assert handle.isolation in {Isolation.BUBBLEWRAP, Isolation.POD, Isolation.NONE}
            backend = SandboxBackend(handle)
            health = await backend.health()
            assert health["status"] == "ok"
            workspace = await backend.run("pwd")
            assert workspace.output.strip() == handle.workspace
            await backend.aclose()
            assert handle.id in {listed.id for listed in await other_provider.list()}
            assert await other_provider.connect(handle.id) == handle
        finally:
            await provider.delete(handle.id)

    async def test_delete_stops_the_sandbox_and_forgets_it(self, provider: SandboxProvider) -> None:
        handle = await provider.create(str(uuid.uuid4()))
        backend = SandboxBackend(handle, connect_timeout=1.0)
        assert await provider.delete(handle.id) is True
        with pytest.raises(SandboxUnavailable):
            await backend.health()
        with pytest.raises(SandboxNotFound):
            await provider.connect(handle.id)
        assert handle.id not in {listed.id for listed in await provider.list()}
        assert await provider.delete(handle.id) is False
        await backend.aclose()

    async def test_connect_to_an_unknown_id_raises_not_found(self, provider: SandboxProvider) -> None:
        with pytest.raises(SandboxNotFound, match="sbx-unknown"):
            await provider.connect("sbx-unknown")

    async def test_exec_reports_exit_code_and_combined_output(self, sandbox: SandboxBackend) -> None:
        result = await sandbox.aexecute("echo to-stdout; echo to-stderr >&2; exit 7")
        assert result.exit_code == 7
        assert result.output == "to-stdout\nto-stderr\n"
        assert result.truncated is False

    async def test_exec_runs_in_the_workspace_with_the_given_environment(self, sandbox: SandboxBackend) -> None:
        await sandbox.run("mkdir -p envcase/sub")
        result = await sandbox.run('pwd; echo "$GREETING"', cwd="envcase/sub", env={"GREETING": "ahoy"})
        assert result.output == f"{sandbox.handle.workspace}/envcase/sub\nahoy\n"

    async def test_timeout_kills_the_whole_process_tree(self, sandbox: SandboxBackend) -> None:
        started = time.monotonic()
        result = await sandbox.run("sh -c 'sleep 60 & echo $!; echo $$; wait'; echo never", time_limit=1.0)
        assert time.monotonic() - started < 10
        assert result.timed_out is True
        assert result.exit_code == protocol.TIMEOUT_EXIT_CODE
        grandchild, child = (int(line) for line in result.output.split())

        async def ended() -> bool:
            return {await process_state(sandbox, grandchild), await process_state(sandbox, child)} <= {"gone", "Z"}

        await eventually(ended, what="the timed-out command's processes ended")

    async def test_timed_out_execute_says_so(self, sandbox: SandboxBackend) -> None:
        result = await sandbox.aexecute("echo started; sleep 30", timeout=1)
        assert result.exit_code == protocol.TIMEOUT_EXIT_CODE
        assert result.output.startswith("started\n")
        assert "timed out after 1 s" in result.output

    async def test_output_beyond_the_cap_is_cut_and_flagged(self, sandbox: SandboxBackend) -> None:
        result = await sandbox.run("head -c 5000 /dev/zero | tr '\\0' x; echo done >&2", output_cap=1000)
        assert (result.exit_code, result.truncated, result.output) == (0, True, "x" * 1000)
        whole = await sandbox.aexecute("head -c 3000000 /dev/zero | tr '\\0' y")
        assert whole.truncated is True
        assert whole.exit_code == 0
        assert whole.output.startswith("y" * 1000)
        assert "output truncated" in whole.output

    async def test_upload_and_download_many_files_with_partial_failures(self, sandbox: SandboxBackend) -> None:
        root = f"{sandbox.handle.workspace}/transfer"
        binary = bytes(range(256)) * 64
        uploaded = await sandbox.aupload_files(
            [
                (f"{root}/deep/new/dir/binary.bin", binary),
                (f"{root}/text.txt", "grüße\n".encode()),
                (f"{root}/../../outside-the-workspace.txt", b"no"),
                (f"{root}/deep", b"a directory is in the way"),
            ]
        )
        assert [(item.path, item.error) for item in uploaded] == [
            (f"{root}/deep/new/dir/binary.bin", None),
            (f"{root}/text.txt", None),
            (f"{root}/../../outside-the-workspace.txt", "invalid_path"),
            (f"{root}/deep", "is_directory"),
        ]
        downloaded = await sandbox.adownload_files(
            [f"{root}/deep/new/dir/binary.bin", f"{root}/missing.txt", f"{root}/deep", "transfer/text.txt"]
        )
        assert [(item.content, item.error) for item in downloaded] == [
            (binary, None),
            (None, "file_not_found"),
            (None, "is_directory"),
            ("grüße\n".encode(), None),
        ]

    async def test_files_that_are_not_regular_files_are_refused_at_once(self, sandbox: SandboxBackend) -> None:
        made = await sandbox.run("mkdir -p special && mkfifo special/fifo && echo kept > special/kept.txt")
        assert made.exit_code == 0, made.output
        # More calls than the daemon has threads for file transfers: none of them may wait for
        # the FIFO's other end.
        async with asyncio.timeout(30):
            downloads = await asyncio.gather(*(sandbox.adownload_files(["special/fifo"]) for _ in range(40)))
            uploads = await sandbox.aupload_files([("special/fifo", b"written")])
            after = await sandbox.adownload_files(["special/kept.txt"])
        assert {(item.content, item.error) for [item] in downloads} == {(None, "not a regular file: a FIFO")}
        assert uploads[0].error == "not a regular file: a FIFO or a socket"
        assert (after[0].content, after[0].error) == (b"kept\n", None)

    async def test_paths_outside_the_workspace_are_refused(self, sandbox: SandboxBackend) -> None:
        workspace = sandbox.handle.workspace
        links = await sandbox.run(
            "mkdir -p escapes && cd escapes && ln -sf / root-link && ln -sf /etc/hostname host-link"
        )
        assert links.exit_code == 0, links.output
        refused = [
            "../escape.txt",
            "escapes/../../escape.txt",
            f"{workspace}/../escape.txt",
            "/etc/hostname",
            "escapes/root-link/etc/hostname",
            "escapes/host-link",
            "",
            "bad\x00path",
        ]
        downloads = await sandbox.adownload_files(refused)
        assert [item.error for item in downloads] == ["invalid_path"] * len(refused)
        uploads = await sandbox.aupload_files(
            [
                (path, b"escaped")
                for path in [*refused[:4], "escapes/root-link/etc/drydock-escaped", "escapes/host-link"]
            ]
        )
        assert {item.error for item in uploads} == {"invalid_path"}
        still_inside = await sandbox.aupload_files([("escapes/../inside.txt", b"fine")])
        assert still_inside[0].error is None
        check = await sandbox.run(
            "cat inside.txt; test ! -e /etc/drydock-escaped && test ! -e ../escape.txt && echo ok"
        )
        assert check.output == "fineok\n"

    async def test_requests_without_the_right_token_are_refused(self, sandbox: SandboxBackend) -> None:
        marker = f"{sandbox.handle.workspace}/unauthorized-{uuid.uuid4().hex}"
        body = {"command": f"touch {marker}"}
        async with httpx.AsyncClient(base_url=sandbox.handle.base_url, trust_env=False) as client:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {sandbox.handle.token}"}):
                assert (await client.get(protocol.HEALTH, headers=headers)).status_code == 401
                refused = await client.post(protocol.EXEC, json=body, headers=headers)
                assert refused.status_code == 401
                assert refused.json() == {"error": "missing or wrong bearer token"}
                assert (await client.post(protocol.DOWNLOAD, json={"paths": []}, headers=headers)).status_code == 401
        assert (await sandbox.run(f"test -e {marker} && echo created || echo absent")).output == "absent\n"
