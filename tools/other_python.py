"""Run a command in a PDM-managed environment on another Python version.

``python -m tools.other_python 3.12 pytest tests`` creates (once) a virtual environment named
``py312`` for the project, syncs it with ``pdm.lock`` (a no-op when nothing changed) and runs
the command inside it; without a command it only prepares the environment. Without that
interpreter the leg fails when ``CI`` is set, and is skipped with a clear line on a developer's
machine.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys


def _pdm(*args: str, capture: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["pdm", *args], check=False, text=True, capture_output=capture)


def find_interpreter(version: str) -> str | None:
    """A working ``pythonX.Y``: on PATH, or installed by pyenv but not selected (its shim then
    exits 127), or in /usr/bin."""
    candidates = [shutil.which(f"python{version}")]
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates += sorted(glob.glob(f"{pyenv_root}/versions/{version}.*/bin/python{version}"), reverse=True)
    candidates.append(f"/usr/bin/python{version}")
    for candidate in candidates:
        if candidate and os.path.exists(candidate):
            probe = subprocess.run([candidate, "-c", "import sys"], check=False, capture_output=True)
            if probe.returncode == 0:
                return candidate
    return None


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m tools.other_python VERSION [COMMAND...]", file=sys.stderr)
        return 2
    version, command = argv[0], argv[1:]
    name = "py" + version.replace(".", "")
    interpreter = find_interpreter(version)
    if interpreter is None:
        message = f"python{version} not found: the unit tests were NOT run on Python {version}"
        if os.environ.get("CI"):
            print(f"error: {message}", file=sys.stderr)
            return 1
        print(f"SKIPPED: {message}; install it to run this leg", file=sys.stderr)
        return 0
    listed = _pdm("venv", "list", capture=True).stdout
    if f"{name}:" not in listed:
        created = _pdm("venv", "create", "--name", name, interpreter)
        if created.returncode != 0:
            return created.returncode
    synced = _pdm("sync", "--venv", name, "-G", "dev", "--quiet")
    if synced.returncode != 0:
        return synced.returncode
    if not command:
        print(f"the Python {version} environment {name} is ready")
        return 0
    print(f"running on Python {version}: {' '.join(command)}", flush=True)
    return _pdm("run", "--venv", name, *command).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
