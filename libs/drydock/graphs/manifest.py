"""The execution manifest ``langgraph.json``: the only list of graph entry points.

Entries use LangGraph's form ``"./path/to/module.py:attribute"`` (a file relative to the
manifest) or ``"package.module:attribute"``. Workers resolve their role's factory here.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_MANIFEST = Path(__file__).resolve().parents[3] / "langgraph.json"


class ManifestError(RuntimeError):
    """The manifest is missing, malformed, or names something that cannot be imported."""


@dataclass(frozen=True)
class Manifest:
    path: Path
    graphs: dict[str, str]
    http_app: str | None
    python_version: str

    @classmethod
    def load(cls, path: Path = DEFAULT_MANIFEST) -> Manifest:
        try:
            raw = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise ManifestError(f"cannot read {path}: {error}") from None
        graphs = raw.get("graphs")
        if not isinstance(graphs, dict) or not all(isinstance(v, str) for v in graphs.values()):
            raise ManifestError(f"{path}: 'graphs' must map names to 'module:attribute' strings")
        return cls(path, graphs, (raw.get("http") or {}).get("app"), str(raw.get("python_version", "")))

    def resolve(self, spec: str) -> Any:
        """Import the object a ``module:attribute`` or ``./file.py:attribute`` spec names."""
        target, _, attribute = spec.partition(":")
        if not attribute:
            raise ManifestError(f"{self.path}: {spec!r} has no ':attribute'")
        module_name = target
        if target.endswith(".py"):
            relative = (self.path.parent / target).resolve().relative_to(self.path.parent.resolve())
            parts = list(relative.with_suffix("").parts)
            if parts[:1] == ["libs"]:
                parts = parts[1:]
            module_name = ".".join(parts)
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise ManifestError(f"{self.path}: cannot import {module_name!r} for {spec!r}: {error}") from None
        try:
            return getattr(module, attribute)
        except AttributeError:
            raise ManifestError(f"{self.path}: {module_name!r} has no attribute {attribute!r}") from None

    def graph_factory(self, name: str) -> Any:
        """The factory of the graph called ``name`` (a role's spec names its graph)."""
        if name not in self.graphs:
            raise ManifestError(f"{self.path} names no graph {name!r}")
        return self.resolve(self.graphs[name])
