"""Which clone failures are retried, and for how long: real ``git clone`` runs; the proxy-side
outage (503 while the store restarts) is in ``tests/credential_proxy/test_store_outage.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from drydock.embedded import free_port
from drydock.sandbox.backend import CommandResult
from drydock.worker.clone_retries import CloneUnavailable, clone_with_retries, transient
from tests.credentials.sandbox_side import clone_attempt
from tests.fakes.git_server import isolated_git_env


class TestCloneRetries:
    async def test_an_outage_that_outlasts_the_window_fails_the_run_for_a_redelivery(
        self, tmp_path: Path, thread_id: str
    ) -> None:
        url = f"http://127.0.0.1:{free_port()}/acme/widgets.git"
        attempts: list[CommandResult] = []

        async def attempt() -> CommandResult:
            attempts.append(await clone_attempt(url, tmp_path / "widgets", isolated_git_env(tmp_path)))
            return attempts[-1]

        with pytest.raises(CloneUnavailable, match="failed transiently"):
            await clone_with_retries(attempt, repository="acme/widgets", thread_id=thread_id, window=2.0)

        assert len(attempts) >= 2
        assert all(transient(failed.output) for failed in attempts)

    async def test_a_repository_that_is_not_there_fails_at_once(self, tmp_path: Path, thread_id: str) -> None:
        attempts: list[CommandResult] = []

        async def attempt() -> CommandResult:
            attempts.append(
                await clone_attempt(str(tmp_path / "nowhere.git"), tmp_path / "w", isolated_git_env(tmp_path))
            )
            return attempts[-1]

        result = await clone_with_retries(attempt, repository="acme/nowhere", thread_id=thread_id, window=30.0)

        assert result.exit_code != 0
        assert len(attempts) == 1
