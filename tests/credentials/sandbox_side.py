"""The sandbox side of the credential tests: a sandbox handle, applying a grant the way the
lifecycle manager does (``git config --global`` pairs, environment on every command), and a
search of everything the sandbox holds for a secret."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

from drydock.sandbox.backend import CommandResult
from drydock.sandbox.credentials import SandboxGrant
from drydock.sandbox.handle import Isolation, SandboxHandle
from tests.fakes.git_server import GitError, git, isolated_git_env


def handle_for(thread_id: str, workspace: Path) -> SandboxHandle:
    return SandboxHandle(
        id=f"sbx-{uuid.uuid4().hex[:12]}",
        provider="local",
        thread_id=thread_id,
        base_url="http://127.0.0.1:9",
        token=uuid.uuid4().hex,
        workspace=str(workspace),
        created_at=datetime.now(UTC),
        isolation=Isolation.NONE,
    )


async def apply_grant(grant: SandboxGrant, home: Path) -> dict[str, str]:
    """Write the grant's git configuration into ``home`` and return the sandbox's environment."""
    env = isolated_git_env(home, grant.environment)
    for key, value in grant.git_config:
        await git("config", "--global", "--add", key, value, env=env)
    return env


def occurrences(secret: str, home: Path, env: dict[str, str], extra_texts: list[str]) -> list[str]:
    """Where ``secret`` appears: file paths under ``home``, ``env:NAME``, or ``text:#``."""
    found = [f"env:{name}" for name, value in env.items() if secret in name or secret in value]
    needle = secret.encode()
    for path in home.rglob("*"):
        if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
            found.append(str(path))
    found += [f"text:{index}" for index, text in enumerate(extra_texts) if secret in text]
    return found


async def clone_attempt(url: str, destination: Path, env: dict[str, str]) -> CommandResult:
    """``git clone url destination`` as the sandbox's daemon would answer it."""
    try:
        output = await git("clone", "-q", url, str(destination), env=env)
    except GitError as failed:
        return CommandResult(exit_code=128, output=str(failed), truncated=False, timed_out=False, duration_ms=0.0)
    return CommandResult(exit_code=0, output=output, truncated=False, timed_out=False, duration_ms=0.0)
