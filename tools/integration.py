"""Run the ``integration/`` suite; an empty suite is an explicit, successful no-op."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

NO_TESTS_COLLECTED = 5


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent / "integration"
    if not any(root.rglob("test_*.py")):
        print("integration: the integration/ suite has no tests yet; nothing to run")
        return 0
    code = int(pytest.main([str(root), "-p", "no:cacheprovider", *argv]))
    if code == NO_TESTS_COLLECTED:
        print("integration: no integration test was collected; nothing to run")
        return 0
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
