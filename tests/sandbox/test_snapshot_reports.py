"""What the snapshot script reports comes from the sandbox, whose code can print anything on its
output (a repository's git configuration runs programs of its own): a capture trusts no number
in it. A sandbox that lies is played here by a backend answering as such a sandbox would."""

from __future__ import annotations

import hashlib

import pytest
from deepagents.backends.protocol import ExecuteResponse, FileDownloadResponse

from drydock.sandbox.snapshots.capture import TooLarge, capture
from drydock.sandbox.snapshots.errors import SnapshotError
from drydock.sandbox.snapshots.sandbox_script import RESULT_PREFIX


class LyingSandbox:
    """Answers the capture script with ``report`` and every download with ``archive``."""

    id = "sbx-lying"

    def __init__(self, report: str, archive: bytes = b"") -> None:
        self.report = report
        self.archive = archive
        self.downloads: list[list[str]] = []

    async def aexecute(self, command: str, **options: object) -> ExecuteResponse:
        if "drydock-snapshot" in command:
            return ExecuteResponse(output=f"{RESULT_PREFIX} {self.report}\n", exit_code=0)
        return ExecuteResponse(output="", exit_code=0)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        self.downloads.append(paths)
        return [FileDownloadResponse(path=path, content=self.archive, error=None) for path in paths]


async def take(sandbox: LyingSandbox, max_bytes: int = 1000) -> object:
    return await capture(
        sandbox,  # type: ignore[arg-type]
        "/workspace/widgets",
        max_bytes=max_bytes,
        previous_fingerprint=None,
        time_limit=10,
    )


class TestReports:
    async def test_a_size_over_the_bound_is_too_large_and_nothing_is_downloaded(self) -> None:
        sandbox = LyingSandbox(f"ready fp clean 5000 {'0' * 64} - -")
        assert await take(sandbox) == TooLarge(size=5000)
        assert sandbox.downloads == []

    @pytest.mark.parametrize("size", ["12abc", "-1", "١٢", "9" * 40, ""])
    async def test_a_size_that_is_not_a_number_is_a_snapshot_error(self, size: str) -> None:
        sandbox = LyingSandbox(f"ready fp clean {size} {'0' * 64} - -")
        with pytest.raises(SnapshotError, match="size"):
            await take(sandbox)
        assert sandbox.downloads == []

    @pytest.mark.parametrize("report", ["too-large", "too-large many", "too-large 1 2"])
    async def test_a_too_large_report_without_one_size_is_a_snapshot_error(self, report: str) -> None:
        with pytest.raises(SnapshotError):
            await take(LyingSandbox(report))

    async def test_an_archive_other_than_the_reported_one_is_refused(self) -> None:
        archive = b"x" * 10
        sandbox = LyingSandbox(f"ready fp clean 5 {hashlib.sha256(archive).hexdigest()} - -", archive)
        with pytest.raises(SnapshotError, match="not the one built"):
            await take(sandbox)
