"""Rendering the Helm chart with the real ``helm`` (installed on first use by :mod:`tools.helm`).

Without helm the tests skip with the reason, unless ``CI`` is set: then they fail, so a CI run
never passes without having rendered the chart.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from tools.helm import HelmUnavailable, install

CHART = Path(__file__).resolve().parents[2] / "charts" / "drydock"
EVERYTHING = CHART / "ci" / "everything-values.yaml"
DEVELOPMENT = CHART / "dev-values.yaml"
RELEASE = "drydock"
NAMESPACE = "drydock"

Manifest = dict[str, Any]
Render = Callable[..., list[Manifest]]


class _UniqueKeyLoader(yaml.SafeLoader):  # type: ignore[misc]
    """Refuses a mapping with a key twice, which YAML parsers disagree about."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        duplicates = {key for key in keys if keys.count(key) > 1}
        if duplicates:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate keys {sorted(duplicates)}", node.start_mark)
        return super().construct_mapping(node, deep=deep)


def parse(text: str) -> list[Manifest]:
    return [document for document in yaml.load_all(text, Loader=_UniqueKeyLoader) if document]


@pytest.fixture(scope="session")
def helm() -> Path:
    try:
        return install()
    except HelmUnavailable as error:
        if os.environ.get("CI"):
            pytest.fail(f"helm is required under CI: {error}")
        pytest.skip(f"helm cannot be installed here: {error}")


def run_helm(helm: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *arguments], capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="session")
def render(helm: Path) -> Render:
    """``render(values_file..., set={"a.b": "c"})``: the manifests ``helm template`` prints."""

    def rendering(*values: Path, set: dict[str, str] | None = None) -> list[Manifest]:
        arguments = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
        for path in values:
            arguments += ["--values", str(path)]
        for key, value in (set or {}).items():
            arguments += ["--set", f"{key}={value}"]
        result = run_helm(helm, *arguments)
        assert result.returncode == 0, result.stderr
        return parse(result.stdout)

    return rendering


@pytest.fixture(scope="session")
def default_manifests(render: Render) -> list[Manifest]:
    return render()


@pytest.fixture(scope="session")
def everything_manifests(render: Render) -> list[Manifest]:
    return render(EVERYTHING)


@pytest.fixture(scope="session")
def development_manifests(render: Render) -> list[Manifest]:
    """With the Tiltfile's values."""
    return render(DEVELOPMENT)


@pytest.fixture(scope="session", params=["default", "everything"])
def manifests(request: pytest.FixtureRequest) -> list[Manifest]:
    """The chart rendered with the default values, then with every option on."""
    rendered: list[Manifest] = request.getfixturevalue(f"{request.param}_manifests")
    return rendered


@pytest.fixture(scope="session")
def default_values() -> Manifest:
    values: Manifest = yaml.safe_load((CHART / "values.yaml").read_text())
    return values


def of_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [manifest for manifest in manifests if manifest["kind"] == kind]


def named(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    found = [manifest for manifest in of_kind(manifests, kind) if manifest["metadata"]["name"] == name]
    assert len(found) == 1, f"{len(found)} {kind} named {name}"
    return found[0]
