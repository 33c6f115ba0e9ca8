"""Reading a checkout's changes at the end of a run (:mod:`drydock.threads.changes`): the script
the worker runs in the sandbox, here run by bash on a checkout of 1,000 files (5 MB) with three
files changed and one added, against where its branch left ``main``. It runs once per coder run,
so it adds to a run's end, not to its steps.

Run: ``pdm run bench changes``.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from bench.harness import measure, report
from drydock.threads.changes import diff_script, parse
from tests.fakes.git_server import git, isolated_git_env

FILES = 1000
FILE_BYTES = 5000


async def _checkout(root: Path) -> tuple[Path, dict[str, str]]:
    env = isolated_git_env(root)
    seed, upstream, clone = root / "seed", root / "upstream.git", root / "checkout"
    for number in range(FILES):
        path = seed / f"package{number % 20}" / f"module{number}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# module {number}\n" + "x = 1\n" * (FILE_BYTES // 6))
    await git("init", "-q", "-b", "main", cwd=seed, env=env)
    await git("add", "-A", cwd=seed, env=env)
    await git("commit", "-q", "-m", "seed", cwd=seed, env=env)
    await git("clone", "-q", "--bare", str(seed), str(upstream), env=env)
    await git("clone", "-q", str(upstream), str(clone), env=env)
    await git("checkout", "-q", "-b", "drydock/work", cwd=clone, env=env)
    for number in (1, 2, 3):
        with (clone / f"package{number}" / f"module{number}.py").open("a") as handle:
            handle.write("y = 2\n")
    (clone / "NOTES.md").write_text("notes\n")
    return clone, env


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="drydock-bench-changes-") as scratch:
        clone, env = await _checkout(Path(scratch))
        script = diff_script(str(clone), "main")

        async def read() -> None:
            process = await asyncio.create_subprocess_exec(
                "bash", "-c", script, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
            )
            out, _ = await process.communicate()
            changes = parse(out.decode())
            if changes is None or len(changes.files) != 4:
                raise RuntimeError(f"unexpected changes: {out.decode()[:500]}")

        report(await measure("checkout changes (1,000 files, 4 changed)", read, count=50, warmup=3))
