"""Workspace snapshots against real git, real processes and the embedded NATS object store.

The sandboxes are deepagents' ``LocalShellBackend`` rooted in temporary directories: a real
backend of the same protocol that runs real commands. Each "machine" has its own workspace and
home, so a restore happens in a fresh sandbox that shares nothing with the one saved from but
the remote repository.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog
from deepagents.backends.local_shell import LocalShellBackend
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from drydock.bus import Bus, provision, topology
from drydock.config import NatsSettings, SandboxSettings, SnapshotSettings
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.providers.local import LocalProvider
from drydock.sandbox.records import SandboxStore
from drydock.sandbox.snapshots import SnapshotCorrupt, SnapshotError, SnapshotInfo, SnapshotStore
from drydock.sandbox.snapshots.records import SnapshotIndex, index_name
from tests.fakes.git_server import GitServer
from tests.sandbox.conftest import loopback_service_as_proxy

ALL_BYTES = bytes(range(256)) * 4


async def run(cwd: Path, env: dict[str, str], *args: str, check: bool = True) -> bytes:
    """Run a command on the host (to build fixtures and to inspect results byte for byte)."""
    process = await asyncio.create_subprocess_exec(
        *args, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    assert process.returncode == 0 or not check, f"{args}: {err.decode(errors='replace')}"
    return out if process.returncode == 0 else b""


@dataclass
class Machine:
    """One sandbox: a shell backend with its own workspace and home directory."""

    sandbox: LocalShellBackend
    workspace: Path
    env: dict[str, str]

    @property
    def repo(self) -> Path:
        return self.workspace / "repo"

    async def sh(self, command: str) -> str:
        """Run ``command`` in the repository through the sandbox backend, as the agent would."""
        response = await self.sandbox.aexecute(f"cd {self.repo} && {command}")
        assert response.exit_code == 0, response.output
        return response.output

    async def git(self, *args: str, check: bool = True) -> bytes:
        return await run(self.repo, self.env, "git", *args, check=check)

    def files(self) -> dict[str, tuple[bytes, bool]]:
        """Every file of the worktree outside ``.git``: content and whether it is executable."""
        found = {}
        for path in sorted(self.repo.rglob("*")):
            relative = path.relative_to(self.repo)
            if relative.parts[0] == ".git" or path.is_dir():
                continue
            found[relative.as_posix()] = (path.read_bytes(), bool(path.stat().st_mode & stat.S_IXUSR))
        return found

    async def picture(self) -> dict[str, bytes]:
        """What a restore must reproduce: status, history, branch, HEAD and both diffs."""
        head = await self.git("rev-parse", "-q", "--verify", "HEAD", check=False)
        return {
            "head": head,
            "status": await self.git("status", "--porcelain=v1", "-z", "--untracked-files=all", "--branch"),
            "log": await self.git("log", "--format=%H %P %s", "--branches", *(["HEAD"] if head else [])),
            "branches": await self.git("for-each-ref", "--format=%(refname) %(objectname) %(upstream)", "refs/heads"),
            "branch": await self.git("symbolic-ref", "-q", "HEAD", check=False),
            "staged": await self.git("diff", "--cached", "--binary"),
            "unstaged": await self.git("diff", "--binary"),
        }

    def scratch_left(self) -> list[str]:
        return [entry.name for entry in self.workspace.iterdir() if entry.name.startswith(".drydock-snapshot")]


MachineFactory = Callable[[], Machine]


@pytest.fixture
def machines(tmp_path: Path) -> MachineFactory:
    counter = iter(range(1000))

    def make() -> Machine:
        root = tmp_path / f"machine-{next(counter)}"
        home, workspace = root / "home", root / "workspace"
        home.mkdir(parents=True)
        workspace.mkdir()
        (home / ".gitconfig").write_text(
            "[user]\n\tname = Drydock Test\n\temail = test@drydock.invalid\n[init]\n\tdefaultBranch = main\n"
        )
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "LANG": "C.UTF-8",
        }
        sandbox = LocalShellBackend(root_dir=workspace, virtual_mode=False, env=env, timeout=60)
        return Machine(sandbox, workspace, env)

    return make


@pytest.fixture
async def remote(tmp_path: Path, machines: MachineFactory) -> Path:
    """A bare repository with two commits on ``main``, a tracked binary file and a ``.gitignore``."""
    bare = tmp_path / "remote.git"
    seeder = machines()
    await run(tmp_path, seeder.env, "git", "init", "--quiet", "--bare", str(bare))
    await run(tmp_path, seeder.env, "git", "clone", "--quiet", str(bare), str(seeder.repo))
    (seeder.repo / "README.md").write_text("# demo\n")
    (seeder.repo / ".gitignore").write_text("*.log\nbuild/\n")
    (seeder.repo / "src").mkdir()
    (seeder.repo / "src" / "app.py").write_text("print('hello')\n")
    (seeder.repo / "src" / "old.py").write_text("OLD = 1\n")
    (seeder.repo / "logo.bin").write_bytes(ALL_BYTES)
    await seeder.git("add", ".")
    await seeder.git("commit", "--quiet", "-m", "first")
    (seeder.repo / "src" / "util.py").write_text("def util():\n    return 1\n")
    await seeder.git("add", ".")
    await seeder.git("commit", "--quiet", "-m", "second")
    await seeder.git("push", "--quiet", "origin", "main")
    return bare


async def clone(machine: Machine, remote: Path) -> None:
    await run(machine.workspace, machine.env, "git", "clone", "--quiet", str(remote), str(machine.repo))


@pytest.fixture
def store(bus: Bus) -> SnapshotStore:
    return SnapshotStore(bus.js, SnapshotSettings())


async def save(store: SnapshotStore, thread_id: str, machine: Machine) -> SnapshotInfo:
    info = await store.save(thread_id, machine.sandbox, repo_dir=str(machine.repo))
    assert info is not None
    return info


async def restore_into_fresh(store: SnapshotStore, thread_id: str, machines: MachineFactory) -> Machine:
    fresh = machines()
    assert await store.restore(thread_id, fresh.sandbox, repo_dir=str(fresh.repo))
    return fresh


async def assert_same_worktree(saved: Machine, restored: Machine, *, ignored: tuple[str, ...] = ()) -> None:
    assert await restored.picture() == await saved.picture()
    expected = {path: value for path, value in saved.files().items() if path not in ignored}
    assert restored.files() == expected
    assert restored.scratch_left() == []


class TestRoundTrip:
    async def test_unpushed_commits_staged_unstaged_and_untracked_files_come_back_exactly(
        self, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        saved = machines()
        await clone(saved, remote)
        await saved.sh("git checkout -q -b drydock/feature")
        await saved.sh("echo 'def feature(): pass' > src/feature.py && git add . && git commit -q -m 'add feature'")
        await saved.sh("echo 'VERSION = 2' >> src/util.py && git commit -q -am 'bump'")
        await saved.sh("git branch -q side main && git checkout -q side && echo side > side.txt")
        await saved.sh("git add side.txt && git commit -q -m side && git checkout -q drydock/feature")
        await saved.sh(
            "echo staged > staged.txt && git add staged.txt && echo 'X = 1' >> src/app.py && git add src/app.py"
        )
        await saved.sh("echo 'Y = 2' >> src/app.py && echo 'more' >> README.md")
        await saved.sh("mkdir -p notes/deep && echo 'untracked' > notes/deep/todo.md && printf '#!/bin/sh\\n' > run.sh")
        await saved.sh("chmod +x run.sh && echo 'noise' > debug.log && mkdir build && echo obj > build/out.o")

        info = await save(store, thread_id, saved)
        assert info.branch == "refs/heads/drydock/feature"
        assert info.head == (await saved.git("rev-parse", "HEAD")).decode().strip()
        assert saved.scratch_left() == []

        restored = await restore_into_fresh(store, thread_id, machines)
        await assert_same_worktree(saved, restored, ignored=("debug.log", "build/out.o"))
        assert not (restored.repo / "debug.log").exists()
        assert not (restored.repo / "build").exists()
        assert (await restored.git("rev-parse", "side")) == (await saved.git("rev-parse", "side"))
        upstream = await restored.git("rev-parse", "--abbrev-ref", "main@{upstream}")
        assert upstream.strip() == b"origin/main"

    async def test_binary_files_come_back_byte_for_byte(
        self, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        saved = machines()
        await clone(saved, remote)
        (saved.repo / "logo.bin").write_bytes(ALL_BYTES[::-1] + b"\x00\xff")
        (saved.repo / "staged.bin").write_bytes(b"\x00" * 100 + ALL_BYTES)
        await saved.git("add", "staged.bin")
        (saved.repo / "blob.dat").write_bytes(os.urandom(4096))

        await save(store, thread_id, saved)
        restored = await restore_into_fresh(store, thread_id, machines)
        await assert_same_worktree(saved, restored)
        assert (restored.repo / "blob.dat").read_bytes() == (saved.repo / "blob.dat").read_bytes()

    async def test_a_rename_and_deletions_come_back(
        self, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        saved = machines()
        await clone(saved, remote)
        await saved.sh("git mv src/util.py src/helpers.py && git rm -q src/old.py && rm README.md")

        await save(store, thread_id, saved)
        restored = await restore_into_fresh(store, thread_id, machines)
        await assert_same_worktree(saved, restored)
        assert not (restored.repo / "README.md").exists()
        assert not (restored.repo / "src" / "util.py").exists()
        assert b"R  src/util.py -> src/helpers.py" in await restored.git("status", "--short")

    async def test_a_nested_repository_is_left_out(
        self, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        saved = machines()
        await clone(saved, remote)
        await saved.sh("git init -q vendor/lib && echo lib > vendor/lib/lib.c && echo mine > mine.txt")

        await save(store, thread_id, saved)
        restored = await restore_into_fresh(store, thread_id, machines)
        assert not (restored.repo / "vendor").exists()
        assert (restored.repo / "mine.txt").read_text() == "mine\n"
        assert await restored.git("diff", "HEAD") == await saved.git("diff", "HEAD")

    async def test_a_detached_head_with_commits_of_its_own(
        self, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        saved = machines()
        await clone(saved, remote)
        await saved.sh("git checkout -q --detach HEAD~1 && echo x > detached.txt && git add . && git commit -q -m d")

        info = await save(store, thread_id, saved)
        assert info.branch is None
        restored = await restore_into_fresh(store, thread_id, machines)
        await assert_same_worktree(saved, restored)

    async def test_a_repository_without_a_remote(
        self, store: SnapshotStore, machines: MachineFactory, thread_id: str
    ) -> None:
        saved = machines()
        saved.repo.mkdir()
        await saved.sh("git init -q && echo one > one.txt && git add . && git commit -q -m one && echo two > two.txt")

        await save(store, thread_id, saved)
        restored = await restore_into_fresh(store, thread_id, machines)
        await assert_same_worktree(saved, restored)

    async def test_a_repository_with_no_commits_yet(
        self, store: SnapshotStore, machines: MachineFactory, thread_id: str
    ) -> None:
        saved = machines()
        saved.repo.mkdir()
        await saved.sh("git init -q && echo s > s.txt && git add s.txt && echo s2 >> s.txt && echo u > u.txt")

        info = await save(store, thread_id, saved)
        assert info.head is None
        restored = await restore_into_fresh(store, thread_id, machines)
        await assert_same_worktree(saved, restored)

    async def test_intent_to_add_files_stay_intent_to_add(
        self, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        saved = machines()
        await clone(saved, remote)
        await saved.sh(
            "echo planned > 'plan *.md' && git add --intent-to-add 'plan *.md' && echo s > s.txt && git add s.txt"
        )

        await save(store, thread_id, saved)
        restored = await restore_into_fresh(store, thread_id, machines)
        await assert_same_worktree(saved, restored)
        assert b' A "plan *.md"' in await restored.git("status", "--short")

    async def test_a_relative_path_restores_where_it_was_taken_in_the_new_workspace(
        self, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        saved = machines()
        await clone(saved, remote)
        await saved.sh("git checkout -q -b rel && echo r > r.txt && git add . && git commit -q -m r && echo u >> r.txt")

        info = await store.save(thread_id, saved.sandbox, repo_dir="./repo/")
        assert info is not None
        assert info.repo_dir == "repo"
        fresh = machines()
        assert await store.restore(thread_id, fresh.sandbox)
        await assert_same_worktree(saved, fresh)

    async def test_an_existing_clean_clone_is_replaced(
        self, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        saved = machines()
        await clone(saved, remote)
        await saved.sh("git checkout -q -b work && echo w > w.txt && git add . && git commit -q -m w && echo u > u.txt")
        await save(store, thread_id, saved)

        fresh = machines()
        await clone(fresh, remote)
        assert await store.restore(thread_id, fresh.sandbox, repo_dir=str(fresh.repo))
        await assert_same_worktree(saved, fresh)

    async def test_an_existing_clone_with_changes_of_its_own_is_left_alone(
        self, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        saved = machines()
        await clone(saved, remote)
        await saved.sh("echo change >> README.md")
        await save(store, thread_id, saved)

        busy = machines()
        await clone(busy, remote)
        await busy.sh("echo mine > mine.txt")
        before = busy.files()
        with pytest.raises(SnapshotError, match=f"thread {thread_id}.*changes of its own"):
            await store.restore(thread_id, busy.sandbox, repo_dir=str(busy.repo))
        assert busy.files() == before
        assert busy.scratch_left() == []


class TestSave:
    async def test_an_identical_save_is_skipped(
        self, bus: Bus, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        machine = machines()
        await clone(machine, remote)
        await machine.sh("echo a > a.txt")
        first = await save(store, thread_id, machine)
        stored = await (await bus.js.object_store(SnapshotSettings().bucket)).get_info(first.name)

        again = await save(store, thread_id, machine)
        assert again == first
        assert await store.history(thread_id) == [first]
        unchanged = await (await bus.js.object_store(SnapshotSettings().bucket)).get_info(first.name)
        assert unchanged.nuid == stored.nuid, "the archive must not be written again"

        await machine.sh("echo b >> a.txt")
        changed = await save(store, thread_id, machine)
        assert changed.seq == first.seq + 1

    async def test_a_push_alone_makes_a_new_smaller_snapshot(
        self, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        machine = machines()
        await clone(machine, remote)
        await machine.sh("head -c 20000 /dev/urandom > big.bin && git add . && git commit -q -m big")
        before = await save(store, thread_id, machine)
        await machine.sh("git push -q origin main")
        after = await save(store, thread_id, machine)
        assert after.seq == before.seq + 1
        assert after.state == before.state
        assert after.size < before.size - 10000, "pushed commits leave the bundle"

    async def test_a_snapshot_over_the_bound_is_not_stored(
        self, bus: Bus, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        store = SnapshotStore(bus.js, SnapshotSettings(max_bytes=64 * 1024))
        machine = machines()
        await clone(machine, remote)
        await machine.sh("echo small > small.txt")
        kept = await save(store, thread_id, machine)

        await machine.sh("head -c 200000 /dev/urandom > huge.bin")
        with structlog.testing.capture_logs() as logs:
            assert await store.save(thread_id, machine.sandbox, repo_dir=str(machine.repo)) is None
        assert await store.history(thread_id) == [kept]
        assert machine.scratch_left() == []
        [refusal] = [entry for entry in logs if entry["event"].startswith("snapshot not stored")]
        assert refusal["thread_id"] == thread_id
        assert refusal["size"] > 64 * 1024
        assert refusal["log_level"] == "warning"

    async def test_only_the_latest_snapshots_are_kept(
        self, bus: Bus, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        store = SnapshotStore(bus.js, SnapshotSettings(keep=2))
        bucket = await bus.js.object_store(SnapshotSettings().bucket)
        machine = machines()
        await clone(machine, remote)
        saved = []
        for turn in range(4):
            await machine.sh(f"echo turn-{turn} > turn.txt")
            saved.append(await save(store, thread_id, machine))

        assert [info.seq for info in await store.history(thread_id)] == [2, 3]
        for pruned in saved[:2]:
            with pytest.raises(NotFoundError):
                await bucket.get_info(pruned.name, show_deleted=True)
        restored = await restore_into_fresh(store, thread_id, machines)
        assert (restored.repo / "turn.txt").read_text() == "turn-3\n"

    async def test_prune_and_delete(self, bus: Bus, machines: MachineFactory, remote: Path, thread_id: str) -> None:
        roomy = SnapshotStore(bus.js, SnapshotSettings(keep=3))
        machine = machines()
        await clone(machine, remote)
        for turn in range(3):
            await machine.sh(f"echo {turn} > turn.txt")
            await save(roomy, thread_id, machine)

        tight = SnapshotStore(bus.js, SnapshotSettings(keep=1))
        assert [info.seq for info in await tight.prune(thread_id)] == [0, 1]
        assert await tight.prune(thread_id) == []
        latest = await tight.latest(thread_id)
        assert latest is not None
        assert latest.seq == 2

        await tight.delete(thread_id)
        assert await tight.latest(thread_id) is None
        bucket = await bus.js.object_store(SnapshotSettings().bucket)
        for name in (latest.name, index_name(thread_id)):
            with pytest.raises(NotFoundError):
                await bucket.get_info(name, show_deleted=True)

    async def test_a_directory_that_is_not_a_repository_is_a_clear_error(
        self, store: SnapshotStore, machines: MachineFactory, thread_id: str
    ) -> None:
        machine = machines()
        machine.repo.mkdir()
        with pytest.raises(SnapshotError, match=f"thread {thread_id}: .*is not a git worktree"):
            await store.save(thread_id, machine.sandbox, repo_dir=str(machine.repo))
        with pytest.raises(SnapshotError, match="there is no directory"):
            await store.save(thread_id, machine.sandbox, repo_dir=str(machine.workspace / "absent"))
        assert machine.scratch_left() == []
        assert await store.latest(thread_id) is None

    async def test_unmerged_paths_are_refused(
        self, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        machine = machines()
        await clone(machine, remote)
        await machine.sh("git checkout -q -b other && echo theirs > README.md && git commit -q -am theirs")
        await machine.sh("git checkout -q main && echo ours > README.md && git commit -q -am ours")
        await machine.sandbox.aexecute(f"cd {machine.repo} && git merge -q other")
        with pytest.raises(SnapshotError, match="unmerged paths"):
            await store.save(thread_id, machine.sandbox, repo_dir=str(machine.repo))

    async def test_bad_arguments_are_rejected(self, store: SnapshotStore, machines: MachineFactory) -> None:
        machine = machines()
        with pytest.raises(ValueError, match="invalid thread id"):
            await store.save("../other", machine.sandbox, repo_dir=str(machine.repo))
        with pytest.raises(ValueError, match="canonical form"):
            await store.latest("6F9619FF-8B86-D011-B42D-00C04FC964FF")
        with pytest.raises(ValueError, match=r"'\.\.' is not allowed"):
            await store.save("6f9619ff-8b86-d011-b42d-00c04fc964ff", machine.sandbox, repo_dir="../repo")
        with pytest.raises(ValueError, match="a directory of its own"):
            await store.restore("6f9619ff-8b86-d011-b42d-00c04fc964ff", machine.sandbox, repo_dir="/")
        with pytest.raises(ValueError, match="invalid repository directory"):
            await store.save("6f9619ff-8b86-d011-b42d-00c04fc964ff", machine.sandbox, repo_dir="")


class TestRestore:
    async def test_a_thread_without_snapshots_restores_nothing(
        self, store: SnapshotStore, machines: MachineFactory, thread_id: str
    ) -> None:
        fresh = machines()
        assert not await store.restore(thread_id, fresh.sandbox, repo_dir=str(fresh.repo))
        assert list(fresh.workspace.iterdir()) == []

    async def test_a_damaged_archive_is_refused(
        self, bus: Bus, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        info = await self._saved(store, machines, remote, thread_id)
        bucket = await bus.js.object_store(SnapshotSettings().bucket)
        archive = bytearray((await bucket.get(info.name)).data or b"")
        archive[len(archive) // 2] ^= 0xFF
        await bucket.put(info.name, bytes(archive))
        await self._assert_refused(store, machines, thread_id, "snapshot 0 is damaged")

    async def test_an_archive_with_damaged_data_is_refused(
        self, bus: Bus, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        info = await self._saved(store, machines, remote, thread_id)
        chunks = await self._chunks_subject(bus, info)
        await bus.js.purge_stream(f"OBJ_{SnapshotSettings().bucket}", subject=chunks)
        await bus.js.publish(chunks, b"\0" * info.size)
        await self._assert_refused(store, machines, thread_id, "does not match its digest")

    async def test_an_archive_whose_data_is_gone_is_refused(
        self, bus: Bus, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        info = await self._saved(store, machines, remote, thread_id)
        chunks = await self._chunks_subject(bus, info)
        await bus.js.purge_stream(f"OBJ_{SnapshotSettings().bucket}", subject=chunks)
        await self._assert_refused(store, machines, thread_id, "its data is gone")

    async def test_a_missing_archive_is_refused(
        self, bus: Bus, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        info = await self._saved(store, machines, remote, thread_id)
        await (await bus.js.object_store(SnapshotSettings().bucket)).delete(info.name)
        await self._assert_refused(store, machines, thread_id, "listed but missing")

    async def test_an_archive_that_does_not_match_its_record_is_refused_in_the_sandbox(
        self, bus: Bus, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        info = await self._saved(store, machines, remote, thread_id)
        forged = info.model_copy(update={"state": "0" * 64})
        bucket = await bus.js.object_store(SnapshotSettings().bucket)
        await bucket.put(index_name(thread_id), SnapshotIndex(next_seq=1, snapshots=[forged]).model_dump_json())
        await self._assert_refused(store, machines, thread_id, "does not match its record")

    async def test_commits_built_on_history_the_remote_lost_are_a_clear_error(
        self, store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        saved = machines()
        await clone(saved, remote)
        await saved.sh("git checkout -q -b gone && echo g > g.txt && git add . && git commit -q -m g")
        await saved.sh("git push -q origin gone && echo h > h.txt && git add . && git commit -q -m h")
        await save(store, thread_id, saved)
        await run(remote, saved.env, "git", "update-ref", "-d", "refs/heads/gone")
        await run(remote, saved.env, "git", "reflog", "expire", "--expire=now", "--all")
        await run(remote, saved.env, "git", "gc", "--quiet", "--prune=now")

        fresh = machines()
        with pytest.raises(SnapshotError, match="history the remote does not have") as raised:
            await store.restore(thread_id, fresh.sandbox, repo_dir=str(fresh.repo))
        assert not isinstance(raised.value, SnapshotCorrupt)
        assert list(fresh.workspace.iterdir()) == []

    @staticmethod
    async def _chunks_subject(bus: Bus, info: SnapshotInfo) -> str:
        bucket = SnapshotSettings().bucket
        stored = await (await bus.js.object_store(bucket)).get_info(info.name)
        return f"$O.{bucket}.C.{stored.nuid}"

    @staticmethod
    async def _saved(store: SnapshotStore, machines: MachineFactory, remote: Path, thread_id: str) -> SnapshotInfo:
        machine = machines()
        await clone(machine, remote)
        await machine.sh("git checkout -q -b w && echo c > c.txt && git add . && git commit -q -m c && echo u > u.txt")
        return await save(store, thread_id, machine)

    @staticmethod
    async def _assert_refused(store: SnapshotStore, machines: MachineFactory, thread_id: str, reason: str) -> None:
        fresh = machines()
        with pytest.raises(SnapshotCorrupt, match=reason):
            await store.restore(thread_id, fresh.sandbox, repo_dir=str(fresh.repo))
        assert list(fresh.workspace.iterdir()) == [], "nothing half-restored may be left behind"


class TestBucket:
    async def test_provisioning_creates_the_configured_bucket(
        self, bus: Bus, machines: MachineFactory, remote: Path, thread_id: str
    ) -> None:
        settings = SnapshotSettings(bucket="drydock-snapshots-provisioned")
        wanted = topology(NatsSettings(), settings)
        await provision(bus.js, wanted)
        await provision(bus.js, wanted)
        store = SnapshotStore(bus.js, settings)
        machine = machines()
        await clone(machine, remote)
        info = await save(store, thread_id, machine)
        assert await store.latest(thread_id) == info
        await self._drop(bus.js, settings.bucket)

    async def test_a_bucket_that_was_not_provisioned_is_a_clear_error(self, bus: Bus, thread_id: str) -> None:
        store = SnapshotStore(bus.js, SnapshotSettings(bucket="never-provisioned"))
        with pytest.raises(SnapshotError, match=r"'never-provisioned' does not exist.*provision"):
            await store.latest(thread_id)

    @staticmethod
    async def _drop(js: JetStreamContext, bucket: str) -> None:
        assert await js.delete_object_store(bucket)


IDENTITY = (
    "GIT_AUTHOR_NAME=T GIT_AUTHOR_EMAIL=t@drydock.invalid GIT_COMMITTER_NAME=T GIT_COMMITTER_EMAIL=t@drydock.invalid"
)

# What a restore must reproduce, as seen from inside a sandbox (ignored files aside).
PICTURE = (
    "cd repo && git status --porcelain=v1 --untracked-files=all --branch && git log --format='%H %P %s' --branches"
    " && git rev-parse HEAD && git diff --cached --binary | sha256sum && git diff --binary | sha256sum"
    " && git ls-files -z --cached --others --exclude-standard | xargs -0 sha256sum"
)


class TestThroughTheLocalProvider:
    async def test_a_new_local_sandbox_gets_the_work_back(
        self,
        store: SnapshotStore,
        bwrap: str,
        sandbox_settings: SandboxSettings,
        records: SandboxStore,
        tmp_path: Path,
        thread_id: str,
    ) -> None:
        async with (
            GitServer(tmp_path / "git") as server,
            loopback_service_as_proxy(int(server.base_url.rsplit(":", 1)[1]), tmp_path / "proxy") as proxy,
        ):
            await server.create_repository(
                "acme/widgets", {"README.md": b"# widgets\n", ".gitignore": b"*.log\n", "logo.bin": ALL_BYTES}
            )
            url = f"{server.base_url}/acme/widgets.git"
            local_provider = LocalProvider(sandbox_settings, records, proxy=proxy)
            first = SandboxBackend(await local_provider.create(thread_id))
            second = SandboxBackend(await local_provider.create(thread_id))
            try:
                setup = await first.aexecute(
                    f"export {IDENTITY} && git clone -q {url} repo && cd repo && git checkout -q -b work"
                    " && echo feature > feature.txt && git add . && git commit -q -m feature"
                    " && echo staged >> README.md && git add README.md && printf '\\000\\001' > new.bin"
                    " && echo unstaged >> feature.txt && echo ignored > debug.log"
                )
                assert setup.exit_code == 0, setup.output
                info = await store.save(thread_id, first, repo_dir="repo")
                assert info is not None
                assert await store.restore(thread_id, second)
                saved, restored = await first.aexecute(PICTURE), await second.aexecute(PICTURE)
                assert saved.exit_code == 0, saved.output
                assert restored.output == saved.output
                assert "## work" in restored.output
                assert "feature.txt" in restored.output
                assert "debug.log" in (await first.aexecute("ls repo")).output
                assert "debug.log" not in (await second.aexecute("ls repo")).output
                assert (await second.aexecute("ls -A")).output.split() == ["repo"]
            finally:
                await first.aclose()
                await second.aclose()
                for handle in (first.handle, second.handle):
                    await local_provider.delete(handle.id)
