from __future__ import annotations

import json
from pathlib import Path

import pytest

from drydock.graphs.manifest import DEFAULT_MANIFEST, Manifest, ManifestError
from drydock.roles import Role


def write(tmp_path: Path, content: object) -> Path:
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps(content))
    return path


class TestManifest:
    def test_the_repository_manifest_is_valid(self) -> None:
        manifest = Manifest.load(DEFAULT_MANIFEST)
        assert manifest.python_version == "3.12"
        assert manifest.http_app is not None
        app = manifest.resolve(manifest.http_app)
        assert app.title == "Drydock web"
        for name in manifest.graphs:
            assert callable(manifest.graph_factory(Role(name)))

    def test_module_and_file_forms(self, tmp_path: Path) -> None:
        manifest = Manifest.load(write(tmp_path, {"graphs": {"coder": "drydock.roles:Role"}}))
        assert manifest.graph_factory(Role.CODER) is Role

    def test_missing_role(self, tmp_path: Path) -> None:
        manifest = Manifest.load(write(tmp_path, {"graphs": {}}))
        with pytest.raises(ManifestError, match="no graph for the reviewer role"):
            manifest.graph_factory(Role.REVIEWER)

    @pytest.mark.parametrize(
        ("spec", "problem"),
        [
            ("drydock.roles", "no ':attribute'"),
            ("drydock.nope:x", "cannot import"),
            ("drydock.roles:Nope", "no attribute"),
        ],
    )
    def test_bad_specs(self, tmp_path: Path, spec: str, problem: str) -> None:
        manifest = Manifest.load(write(tmp_path, {"graphs": {"coder": spec}}))
        with pytest.raises(ManifestError, match=problem):
            manifest.graph_factory(Role.CODER)

    def test_malformed(self, tmp_path: Path) -> None:
        path = tmp_path / "langgraph.json"
        path.write_text("{")
        with pytest.raises(ManifestError, match="cannot read"):
            Manifest.load(path)
        with pytest.raises(ManifestError, match="'graphs' must map"):
            Manifest.load(write(tmp_path, {"graphs": ["coder"]}))
