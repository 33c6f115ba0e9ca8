"""A run's checkout of its thread's repository in the sandbox: the clone (through the
credential proxy), the snapshot after each turn, and the record of its changes for the dashboard."""

from __future__ import annotations

import asyncio
import shlex
from dataclasses import replace

import structlog

from drydock.errors import describe
from drydock.middleware.scoped_instructions import MAX_INSTRUCTION_BYTES, instruction_text
from drydock.redaction import Redactor
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.snapshots import SnapshotStore
from drydock.threads.changes import ThreadChanges, diff_script, parse
from drydock.threads.checkout import Checkout
from drydock.worker.clone_retries import RETRY_WINDOW, clone_with_retries
from drydock.worker.role_spec import RunEnded

log = structlog.get_logger(__name__)


class Checkouts:
    """Clones, snapshots and records the changes of run checkouts for one worker."""

    def __init__(
        self,
        *,
        host: str,
        changes: ThreadChanges,
        snapshots: SnapshotStore | None = None,
        clone_window: float = RETRY_WINDOW,
    ) -> None:
        self.host = host
        self.clone_window = clone_window
        """Seconds a clone retries transient failures before the run fails for a redelivery."""
        self.changes = changes
        self.snapshots = snapshots
        """Saves the checkout at the end of each turn, so a recreated sandbox gets unpushed work back."""

    async def snapshot(self, thread_id: str, backend: SandboxBackend, checkout: Checkout) -> None:
        if self.snapshots is None:
            return
        relative = checkout.path.removeprefix(backend.handle.workspace.rstrip("/") + "/")
        try:
            await self.snapshots.save(thread_id, backend, repo_dir=relative)
        except Exception as error:
            # The run's work is done and checkpointed; a missing snapshot only matters if this
            # sandbox is lost before the next one, so it must not fail the run.
            log.warning("snapshot after the turn failed", thread_id=thread_id, error=repr(error))

    async def record_changes(
        self, thread_id: str, backend: SandboxBackend, checkout: Checkout, redactor: Redactor
    ) -> None:
        try:
            result = await backend.run(diff_script(checkout.path, checkout.default_branch), time_limit=60)
            changes = parse(result.output) if result.exit_code == 0 else None
            if changes is None:
                log.warning("reading the checkout's changes failed", thread_id=thread_id, exit_code=result.exit_code)
                return
            where = "the checkout's changes"
            changes = replace(changes, patch=redactor.redact(changes.patch, where=where, thread_id=thread_id))
            await self.changes.save(thread_id, changes)
        except Exception as error:
            # The dashboard's diff view is a convenience: the run's outcome must not depend on it.
            log.warning("recording the checkout's changes failed", thread_id=thread_id, error=describe(error))

    async def existing(self, backend: SandboxBackend, repository: str) -> Checkout | None:
        """The checkout of ``repository`` if the sandbox's files alone show one with its default
        branch (None otherwise, and :meth:`clone` decides): the remote's ``HEAD`` ref and the
        ``AGENTS.md`` read as one download, with no command and no grant, so it may run before
        the sandbox is known to answer."""
        path = _checkout_path(backend, repository)
        head, agents_md = await backend.adownload_files(
            [_origin_head(path), f"{path}/AGENTS.md"], max_file_bytes=MAX_INSTRUCTION_BYTES
        )
        # The first line only, as git and the clone's script read it: the file is the sandbox's.
        ref = (head.content or b"").decode(errors="replace").partition("\n")[0].strip()
        if not ref.startswith(_REF):
            return None
        return _checkout(repository, path, ref.removeprefix(_REF), agents_md.content)

    async def clone(self, backend: SandboxBackend, repository: str) -> Checkout:
        """Clone ``repository`` into the sandbox's workspace unless it is there (through the
        credential proxy, by the grant's git rules; a transient failure is retried, and one that
        lasts raises :class:`~drydock.worker.clone_retries.CloneUnavailable` so that the wake is
        redelivered); read its default branch and root AGENTS.md.

        A checkout already there costs one command of shell builtins (no git process) and the
        download of its AGENTS.md, sent together; the download is repeated only when the command
        had to clone (it ran before the file existed)."""
        path = _checkout_path(backend, repository)
        url = f"https://{self.host}/{repository}.git"
        agents_md = asyncio.ensure_future(
            backend.adownload_files([f"{path}/AGENTS.md"], max_file_bytes=MAX_INSTRUCTION_BYTES)
        )
        try:
            result = await clone_with_retries(
                lambda: backend.run(_checkout_script(path, url), time_limit=600),
                repository=repository,
                thread_id=backend.handle.thread_id,
                window=self.clone_window,
            )
        except BaseException:
            agents_md.cancel()
            await asyncio.gather(agents_md, return_exceptions=True)
            raise
        await asyncio.gather(agents_md, return_exceptions=True)
        if result.exit_code != 0:
            tail = result.output.strip()[-600:]
            raise RunEnded(f"I could not clone {repository} into my sandbox:\n```\n{tail}\n```")
        downloaded = (
            agents_md.result()
            if _CLONED not in result.output.splitlines() and agents_md.exception() is None
            else await backend.adownload_files([f"{path}/AGENTS.md"], max_file_bytes=MAX_INSTRUCTION_BYTES)
        )[0]
        return _checkout(repository, path, _branch_printed(result.output), downloaded.content)


_CLONED = "drydock: cloned"
_BRANCH = "drydock: default branch "
_REF = "ref: refs/remotes/"


def _checkout_path(backend: SandboxBackend, repository: str) -> str:
    return f"{backend.handle.workspace.rstrip('/')}/{repository.rsplit('/', 1)[-1]}"


def _origin_head(path: str) -> str:
    return f"{path}/.git/refs/remotes/origin/HEAD"


def _branch_printed(output: str) -> str:
    """The remote's default branch as :func:`_checkout_script` printed it (empty when unknown)."""
    return next((line.removeprefix(_BRANCH) for line in reversed(output.splitlines()) if line.startswith(_BRANCH)), "")


def _checkout(repository: str, path: str, remote_branch: str, agents_md: bytes | None) -> Checkout:
    """The checkout at ``path``, from its remote default branch (``origin/NAME``) and the content
    of its AGENTS.md (cut as the scoped instruction files are)."""
    default_branch = remote_branch.removeprefix("origin/")
    instructions = instruction_text(agents_md)
    return Checkout(repository=repository, path=path, default_branch=default_branch or None, instructions=instructions)


def _checkout_script(path: str, url: str) -> str:
    """Clone unless ``path`` holds a checkout, then print the default branch (``origin/NAME``,
    empty when unknown). The files backend keeps the symbolic ref ``origin/HEAD`` as a file of
    one line (``ref: refs/remotes/origin/NAME``; never packed), which the shell reads itself;
    only without that file (another ref backend) does git answer."""
    where = shlex.quote(path)
    head = shlex.quote(_origin_head(path))
    return "\n".join(
        [
            "set -e",
            f"if [ ! -d {where}/.git ]; then git clone --quiet {shlex.quote(url)} {where}; echo '{_CLONED}'; fi",
            "head=''",
            f"if [ -f {head} ]; then read -r head < {head} || true; fi",
            'case "$head" in',
            f"  '{_REF}'*) branch=\"${{head#{_REF}}}\" ;;",
            f"  *) branch=$(git -C {where} symbolic-ref --quiet --short refs/remotes/origin/HEAD || true) ;;",
            "esac",
            f'echo "{_BRANCH}$branch"',
        ]
    )
