"""Which paths a push changes, seen from the bytes git sends.

A ``git-receive-pack`` request body is the ref-update commands (pkt-lines ``old new ref``, the
first with the client's capabilities after a NUL, then a flush), optional push options (another
flush-terminated list), then a packfile, usually *thin* (its deltas may use objects the server
already has). :func:`parse_request` reads the commands.

:class:`Mirrors` answers which paths the push changes with real git, against a bare mirror of the
upstream repository kept by the proxy: it fetches the mirror (with the grant's upstream token,
passed in git's environment, never on a command line), indexes the pushed pack into a
quarantine object directory whose alternate is the mirror (``git index-pack --stdin
--fix-thin``, the command ``receive-pack`` itself runs on untrusted packs; the mirror is never
written by a push), and lists

- the tree difference ``old..new`` of every updated ref (``git diff-tree``, each side peeled to
  its commit), and
- the paths each pushed commit changes against its first parent, for commits no upstream branch
  or tag has (``git log --not --branches --tags``): a branch's first push, and commits that a
  later commit reverts, count too.

with the mode each path has after the push, so that symbolic links and gitlinks are told apart
(:class:`Changes`). A deletion changes no path. Revisions go to git on its standard input, never as arguments, and a
push updating more than :data:`MAX_UPDATES` refs is refused before any git runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from drydock.threads.approvals import ZERO_ID, RefUpdate

_OID_LENGTHS = frozenset({40, 64})
HEAD_LIMIT = 4 * 1024 * 1024
"""The most bytes of commands and push options read before the pack."""
MAX_UPDATES = 1000
"""The most ref updates one inspected push may make."""
_GIT_TIMEOUT = 300.0


class MalformedPush(ValueError):
    """The body is not a receive-pack request the proxy can read."""


class InspectionFailed(RuntimeError):
    """Git could not answer (upstream unreachable, a pack git refuses); the push is refused."""


@dataclass(frozen=True)
class PushRequest:
    updates: tuple[RefUpdate, ...]
    capabilities: frozenset[str]
    pack_offset: int
    """Where the packfile starts in the body."""


def _pkt_line(body: bytes, position: int) -> tuple[bytes | None, int]:
    """The pkt-line at ``position`` (``None`` for a flush) and the position after it."""
    if len(body) < position + 4:
        raise MalformedPush("the push request ends inside its commands")
    try:
        length = int(body[position : position + 4], 16)
    except ValueError:
        raise MalformedPush("the push request's commands are not pkt-lines") from None
    if length == 0:
        return None, position + 4
    if length < 4 or len(body) < position + length:
        raise MalformedPush("the push request has a truncated pkt-line")
    return body[position + 4 : position + length], position + length


def _oid(value: str) -> str:
    if len(value) not in _OID_LENGTHS or any(ch not in "0123456789abcdef" for ch in value):
        raise MalformedPush(f"{value[:80]!r} is not an object id")
    return value


def parse_request(body: bytes) -> PushRequest:
    """The ref updates, capabilities and pack offset of a receive-pack request ``body`` (at least
    its head: the commands and push options). No update at all is git's probe of a large push
    (a lone flush, sent before the chunked body)."""
    updates: list[RefUpdate] = []
    capabilities: frozenset[str] = frozenset()
    payload, position = _pkt_line(body, 0)
    while payload is not None:
        if payload.startswith(b"shallow "):
            payload, position = _pkt_line(body, position)
            continue
        if payload.startswith(b"push-cert"):
            raise MalformedPush("signed pushes (--signed) are not supported through the proxy")
        command, nul, caps = payload.partition(b"\0")
        if nul:
            capabilities = frozenset(caps.decode("utf-8", "replace").split())
        parts = command.decode("utf-8", "replace").rstrip("\n").split(" ", 2)
        if len(parts) != 3 or not parts[2].startswith("refs/"):
            raise MalformedPush("a push command is not 'old new ref'")
        updates.append(RefUpdate(_oid(parts[0]), _oid(parts[1]), parts[2]))
        if len(updates) > MAX_UPDATES:
            raise MalformedPush(
                f"the push updates more than {MAX_UPDATES} refs, more than the proxy inspects at once; "
                "push them in several pushes"
            )
        payload, position = _pkt_line(body, position)
    if "push-options" in capabilities:
        option: bytes | None = b""
        while option is not None:
            option, position = _pkt_line(body, position)
    return PushRequest(tuple(updates), capabilities, position)


def _git_environment(extra: Mapping[str, str]) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": tempfile.gettempdir(),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
        **extra,
    }


async def _git(*args: str, env: Mapping[str, str], stdin: int | bytes | None = None) -> bytes:
    """Git's output; ``stdin`` is a file descriptor to read or the bytes to write to it."""
    data: bytes | None = None
    source = asyncio.subprocess.DEVNULL
    if isinstance(stdin, bytes):
        data, source = stdin, asyncio.subprocess.PIPE
    elif stdin is not None:
        source = stdin
    try:
        process = await asyncio.create_subprocess_exec(
            "git",
            *args,
            stdin=source,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=_git_environment(env),
        )
    except OSError as error:
        raise InspectionFailed(f"git {args[0]} could not start: {error}") from None
    try:
        out, err = await asyncio.wait_for(process.communicate(data), _GIT_TIMEOUT)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise InspectionFailed(f"git {args[0]} took longer than {_GIT_TIMEOUT:g} s") from None
    if process.returncode != 0:
        raise InspectionFailed(f"git {args[0]} failed: {err.decode('utf-8', 'replace').strip()[-500:]}")
    return out


LINK_MODES = frozenset({"120000", "160000"})
"""A symbolic link and a gitlink (a submodule's commit)."""


@dataclass(frozen=True)
class Changes:
    """What a push changes: every path, and those it makes a symbolic link or a gitlink."""

    paths: frozenset[str] = frozenset()
    links: frozenset[str] = frozenset()

    def __or__(self, other: Changes) -> Changes:
        return Changes(self.paths | other.paths, self.links | other.links)


def _changes(output: bytes) -> Changes:
    """The changes in ``--raw -z`` output: ``:old-mode new-mode old new status``, then the path."""
    paths: set[str] = set()
    links: set[str] = set()
    fields = iter(output.decode("utf-8", "surrogateescape").split("\0"))
    for field in fields:
        header = field.strip("\n")
        if not header.startswith(":"):
            continue
        path = next(fields, "")
        paths.add(path)
        modes = header[1:].split(" ")
        if len(modes) > 1 and modes[1] in LINK_MODES:
            links.add(path)
    return Changes(frozenset(paths), frozenset(links))


async def _commits(oids: list[str], env: Mapping[str, str]) -> list[str]:
    """The commit each of ``oids`` peels to. ``git diff-tree --stdin`` silently skips a line naming
    a tag, so it is given commits only."""
    lines = "".join(f"{oid}^{{commit}}\n" for oid in oids).encode()
    out = await _git("cat-file", "--batch-check=%(objectname)", env=env, stdin=lines)
    commits = out.decode("ascii", "replace").splitlines()
    if len(commits) != len(oids) or any(len(commit) not in _OID_LENGTHS for commit in commits):
        raise InspectionFailed("a ref update names an object that is not a commit")
    return commits


class Mirrors:
    """Bare mirrors of upstream repositories under ``root``, one per repository."""

    def __init__(self, root: Path, git_upstream: str) -> None:
        self._root = root
        self._upstream = git_upstream.rstrip("/")
        self._locks: dict[str, asyncio.Lock] = {}

    def _path(self, repository: str) -> Path:
        owner, name = repository.lower().split("/", 1)
        return self._root / "mirrors" / owner / f"{name}.git"

    async def _fetch(self, repository: str, authorization: str) -> Path:
        mirror = self._path(repository)
        lock = self._locks.setdefault(repository.lower(), asyncio.Lock())
        async with lock:
            if not (mirror / "objects").is_dir():
                await asyncio.to_thread(mirror.parent.mkdir, parents=True, exist_ok=True)
                await _git("init", "--bare", "--quiet", str(mirror), env={})
            header = {
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "http.extraHeader",
                "GIT_CONFIG_VALUE_0": f"Authorization: {authorization}",
                "GIT_DIR": str(mirror),
            }
            url = f"{self._upstream}/{repository}.git"
            await _git(
                "fetch", "--quiet", "--prune", "--no-tags", url,
                "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*",
                env=header,
            )  # fmt: skip
        return mirror

    async def changes(self, repository: str, authorization: str, body: Path, push: PushRequest) -> Changes:
        """Every path the push in ``body`` (a receive-pack request, spooled) changes."""
        created = [u for u in push.updates if u.new != ZERO_ID]
        if not created:
            return Changes()
        mirror = await self._fetch(repository, authorization)
        quarantine = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="push-", dir=self._root))
        try:
            objects = quarantine / "objects"
            await asyncio.to_thread((objects / "pack").mkdir, parents=True)
            env = {
                "GIT_DIR": str(mirror),
                "GIT_OBJECT_DIRECTORY": str(objects),
                "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(mirror / "objects"),
            }
            size = (await asyncio.to_thread(body.stat)).st_size
            if size > push.pack_offset:
                with body.open("rb") as stream:
                    stream.seek(push.pack_offset)
                    await _git("index-pack", "--stdin", "--fix-thin", env=env, stdin=stream.fileno())
            changes = Changes()
            updated = [u for u in created if u.old != ZERO_ID]
            if updated:
                commits = await _commits([oid for u in updated for oid in (u.new, u.old)], env)
                # A line "new old" diffs the commit new against old, given as its only parent.
                pairs = "".join(f"{commits[i]} {commits[i + 1]}\n" for i in range(0, len(commits), 2))
                diff = await _git(
                    "diff-tree", "--stdin", "--no-commit-id", "-r", "-z", "--raw", "--no-renames",
                    env=env, stdin=pairs.encode(),
                )  # fmt: skip
                changes |= _changes(diff)
            log = await _git(
                "log", "--format=", "--raw", "-z", "--no-renames", "--diff-merges=first-parent",
                "--stdin", "--not", "--branches", "--tags",
                env=env, stdin="".join(f"{u.new}\n" for u in created).encode(),
            )  # fmt: skip
            return changes | _changes(log)
        finally:
            await asyncio.to_thread(shutil.rmtree, quarantine, True)
