"""The PDM scripts a developer runs: ``pdm run test PATH`` runs only PATH, an empty
integration suite is an explicit, successful no-op, and the cluster suites that skip in CI
still find their fixtures."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tools import integration

ROOT = Path(__file__).resolve().parents[2]
ONE_FILE = "tests/project_tools/test_helm.py"


def pyproject() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


def test_the_test_script_runs_only_the_path_it_is_given() -> None:
    scripts = pyproject()["tool"]["pdm"]["scripts"]  # type: ignore[index]
    program, *arguments = shlex.split(scripts["test"]["cmd"])
    assert program == "pytest"
    command = [sys.executable, "-m", "pytest", *arguments, ONE_FILE, "--collect-only", "-q", "-p", "no:randomly"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=110, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    collected = [line for line in result.stdout.splitlines() if "::" in line]
    assert collected
    assert all(line.startswith(ONE_FILE + "::") for line in collected), collected


def test_without_a_path_the_test_script_runs_the_unit_suite() -> None:
    assert pyproject()["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]  # type: ignore[index]


def test_an_empty_integration_suite_says_so_and_succeeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "README.md").write_text("nothing here yet\n")
    assert integration.main([], root=tmp_path) == 0
    assert "has no tests yet; nothing to run" in capsys.readouterr().out


def test_an_integration_suite_that_collects_nothing_says_so_and_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRYDOCK_TEST_ARTIFACTS", str(tmp_path / "artifacts"))
    monkeypatch.setattr(integration, "ensure_chromium", lambda: None)
    (tmp_path / "test_nothing.py").write_text('"""A module with no test in it."""\n')
    assert integration.main(["-q", "-p", "no:asyncio"], root=tmp_path) == 0
    assert "no integration test was collected; nothing to run" in capsys.readouterr().out


def test_every_cluster_test_finds_its_fixtures_where_it_would_skip() -> None:
    """CI has no cluster, so the cluster suites skip there; pytest's setup plan still resolves
    every fixture they ask for, without running one, so a suite that would error at setup on a
    cluster fails here instead."""
    environment = {name: value for name, value in os.environ.items() if name != "KUBECONFIG"}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "integration",
        "--setup-plan",
        "-q",
        "-p",
        "no:randomly",
        "-o",
        "addopts=",
    ]
    result = subprocess.run(
        command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=110, check=False
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    planned = {line.split("::")[0].strip() for line in result.stdout.splitlines() if "::" in line}
    assert {
        "integration/test_cluster.py",
        "integration/test_kubernetes_provider.py",
        "integration/test_whole_path.py",
    } <= planned
