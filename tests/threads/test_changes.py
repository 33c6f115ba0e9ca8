"""A checkout's changes read from real git: committed and uncommitted changes against where the
branch left the default branch, without touching what the agent staged; kept per thread."""

from __future__ import annotations

import asyncio
from pathlib import Path

from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.threads.changes import KEEP, PATCH_LIMIT, ThreadChanges, diff_script, parse
from tests.fakes.git_server import git, isolated_git_env


async def shell(script: str, env: dict[str, str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "bash", "-c", script, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await process.communicate()
    return int(process.returncode or 0), out.decode(errors="replace")


async def checkout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A clone of an upstream with ``calc.py`` and ``old.txt`` on main, on a new branch."""
    env = isolated_git_env(tmp_path)
    seed, upstream, clone = tmp_path / "seed", tmp_path / "upstream.git", tmp_path / "widgets"
    seed.mkdir()
    (seed / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (seed / "old.txt").write_text("old\n")
    await git("init", "-q", "-b", "main", cwd=seed, env=env)
    await git("add", "-A", cwd=seed, env=env)
    await git("commit", "-q", "-m", "seed", cwd=seed, env=env)
    await git("clone", "-q", "--bare", str(seed), str(upstream), env=env)
    await git("clone", "-q", str(upstream), str(clone), env=env)
    await git("checkout", "-q", "-b", "drydock/fix", cwd=clone, env=env)
    return clone, env


class TestReadingChanges:
    async def test_committed_uncommitted_and_new_files_against_the_branch_point(self, tmp_path: Path) -> None:
        clone, env = await checkout(tmp_path)
        (clone / "calc.py").write_text("def add(a, b):\n    return a + b\n")
        await git("commit", "-q", "-am", "Fix add()", cwd=clone, env=env)
        (clone / "old.txt").unlink()
        (clone / "NOTES.md").write_text("notes\n")
        (clone / "staged.txt").write_text("staged\n")
        await git("add", "staged.txt", cwd=clone, env=env)
        staged_before = await git("diff", "--cached", "--name-only", cwd=clone, env=env)

        code, output = await shell(diff_script(str(clone), "main"), env)
        assert code == 0, output
        changes = parse(output)
        assert changes is not None
        assert changes.base == (await git("rev-parse", "main", cwd=clone, env=env)).strip()
        found = {change.path: (change.status, change.additions, change.deletions) for change in changes.files}
        assert found == {
            "NOTES.md": ("A", 1, 0),
            "calc.py": ("M", 1, 1),
            "old.txt": ("D", 0, 1),
            "staged.txt": ("A", 1, 0),
        }
        assert "+    return a + b" in changes.patch
        assert "-    return a - b" in changes.patch
        assert not changes.truncated
        assert await git("diff", "--cached", "--name-only", cwd=clone, env=env) == staged_before

    async def test_no_changes_and_no_default_branch(self, tmp_path: Path) -> None:
        clone, env = await checkout(tmp_path)
        code, output = await shell(diff_script(str(clone), None), env)
        assert code == 0, output
        changes = parse(output)
        assert changes is not None
        assert (changes.files, changes.patch.strip()) == ([], "")

    async def test_a_large_diff_is_cut_and_says_so(self, tmp_path: Path) -> None:
        clone, env = await checkout(tmp_path)
        (clone / "big.txt").write_text("".join(f"line {number}\n" for number in range(PATCH_LIMIT // 8)))
        code, output = await shell(diff_script(str(clone), "main"), env)
        changes = parse(output)
        assert code == 0
        assert changes is not None
        assert changes.truncated
        assert len(changes.patch.encode()) <= PATCH_LIMIT
        assert [change.path for change in changes.files] == ["big.txt"]

    def test_other_output_is_not_changes(self) -> None:
        assert parse("fatal: not a git repository") is None


class TestThreadChanges:
    async def test_the_latest_changes_of_a_thread(self, tmp_path: Path, redis: Redis, keys: Keys) -> None:
        clone, env = await checkout(tmp_path)
        (clone / "calc.py").write_text("changed\n")
        changes = parse((await shell(diff_script(str(clone), "main"), env))[1])
        assert changes is not None
        store = ThreadChanges(redis, keys)
        assert await store.get("t-1") is None
        await store.save("t-1", changes)
        assert await store.get("t-1") == changes
        assert 0 < await redis.ttl(keys.thread_changes("t-1")) <= KEEP.total_seconds()
