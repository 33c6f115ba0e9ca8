"""The Tiltfile stays true to the chart: Tilt cannot run on our machines (no binary in any
registry we reach), so what it names is checked against the chart it deploys."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from tests.chart.conftest import CHART, DEVELOPMENT, Manifest

TILTFILE = Path(__file__).resolve().parents[2] / "Tiltfile"


def _calls(name: str) -> list[ast.Call]:
    """Every call of ``name`` in the Tiltfile (Starlark parses as Python for these calls)."""
    tree = ast.parse(TILTFILE.read_text())
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
    ]


def _resource_names() -> set[str]:
    """The names given to ``k8s_resource``, with its loop over workers expanded."""
    names: set[str] = set()
    tree = ast.parse(TILTFILE.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.List):
            for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
                if isinstance(call.func, ast.Name) and call.func.id == "k8s_resource":
                    for element in node.iter.elts:
                        assert isinstance(element, ast.Constant)
                        assert isinstance(element.value, str)
                        names.add(f"drydock-{element.value}")
    for call in _calls("k8s_resource"):
        first = call.args[0]
        if isinstance(first, ast.Constant):
            names.add(str(first.value))
    return names


def _values(path: Path) -> dict[str, Any]:
    import yaml  # type: ignore[import-untyped]

    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


class TestTiltfileMatchesTheChart:
    def test_every_resource_it_names_is_a_deployment_of_the_chart(self, development_manifests: list[Manifest]) -> None:
        deployments = {m["metadata"]["name"] for m in development_manifests if m["kind"] == "Deployment"}
        named = _resource_names()
        assert named, "no k8s_resource found in the Tiltfile"
        assert named <= deployments, named - deployments
        assert deployments <= named, f"deployments Tilt does not list: {deployments - named}"

    def test_it_deploys_the_chart_with_the_development_values(self) -> None:
        (call,) = _calls("helm")
        assert isinstance(call.args[0], ast.Constant)
        assert (TILTFILE.parent / str(call.args[0].value)).resolve() == CHART
        values = next(k.value for k in call.keywords if k.arg == "values")
        assert isinstance(values, ast.List)
        assert [(TILTFILE.parent / str(v.value)).resolve() for v in values.elts if isinstance(v, ast.Constant)] == [
            DEVELOPMENT
        ]

    def test_the_service_image_it_builds_is_the_one_the_chart_runs(self, development_manifests: list[Manifest]) -> None:
        (build,) = _calls("docker_build_with_restart")
        assert isinstance(build.args[0], ast.Constant)
        built = str(build.args[0].value)
        images = {
            container["image"].rsplit(":", 1)[0]
            for m in development_manifests
            if m["kind"] == "Deployment"
            for container in m["spec"]["template"]["spec"]["containers"]
        }
        assert images == {built}

    def test_the_sandbox_image_it_builds_is_the_one_workers_start(self) -> None:
        (resource,) = [c for c in _calls("local_resource") if getattr(c.args[0], "value", None) == "sandbox-image"]
        command = next(k.value for k in resource.keywords if k.arg == "cmd")
        text = ast.unparse(command)
        tagged = re.search(r"-t (\S+?) ", text)
        assert tagged is not None, text
        sandbox = _values(DEVELOPMENT)["sandbox"]["image"]
        assert tagged.group(1) == f"{sandbox['repository']}:{sandbox['tag']}"
        assert "Dockerfile.sandbox" in text
