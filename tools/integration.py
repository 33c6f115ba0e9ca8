"""Run the ``integration/`` suite; an empty suite is an explicit, successful no-op.

Before the tests: the browser tests need Debian's Chromium at ``/usr/bin/chromium``
(FIELD-NOTES); when it is missing and this runs as root with apt-get (CI), it is installed,
otherwise those tests skip with the reason. Test artifacts (the browser tests' screenshots) go to
``DRYDOCK_TEST_ARTIFACTS``, by default ``build/integration-artifacts``; the runner prints where.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NO_TESTS_COLLECTED = 5
ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path(os.environ.get("DRYDOCK_TEST_CHROMIUM", "/usr/bin/chromium"))


def ensure_chromium() -> None:
    """Install Debian's chromium package when it is missing and we may (root, apt-get)."""
    if CHROMIUM.exists():
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print(f"integration: no Chromium at {CHROMIUM} and no root apt-get to install it: the browser tests skip")
        return
    print("integration: installing Debian's chromium package for the browser tests", flush=True)
    install = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    environment = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run(install, env=environment, check=False).returncode != 0:
        subprocess.run(["apt-get", "update"], env=environment, check=False)
        if subprocess.run(install, env=environment, check=False).returncode != 0:
            print("integration: installing chromium failed: the browser tests skip")


def main(argv: list[str], root: Path = ROOT / "integration") -> int:
    """Run the suite under ``root`` with ``argv`` passed to pytest; no test there is a successful no-op."""
    if not any(root.rglob("test_*.py")):
        print("integration: the integration/ suite has no tests yet; nothing to run")
        return 0
    ensure_chromium()
    artifacts = Path(os.environ.setdefault("DRYDOCK_TEST_ARTIFACTS", str(ROOT / "build" / "integration-artifacts")))
    artifacts.mkdir(parents=True, exist_ok=True)
    print(f"integration: test artifacts (screenshots) go to {artifacts}", flush=True)
    code = int(pytest.main([str(root), "-p", "no:cacheprovider", *argv]))
    if code == NO_TESTS_COLLECTED:
        print("integration: no integration test was collected; nothing to run")
        return 0
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
