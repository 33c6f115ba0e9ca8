"""Each role is declared once, by its spec in ``drydock.worker.roles``: the spec agrees with the
manifest, the tool registry and the worker service that names it."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from drydock.graphs import entrypoints
from drydock.graphs.manifest import Manifest
from drydock.roles import Role
from drydock.tools import REGISTRY
from drydock.worker.role_spec import RoleSpec


def role_module(role: Role) -> ModuleType:
    return importlib.import_module(f"drydock.worker.roles.{role.value}")


@pytest.mark.parametrize("role", list(Role))
class TestRoleSpecs:
    def test_each_role_has_one_spec_of_its_own(self, role: Role) -> None:
        spec = role_module(role).SPEC
        assert isinstance(spec, RoleSpec)
        assert spec.role is role
        assert spec.tools is role_module(role).TOOLS

    def test_the_spec_names_the_graph_the_manifest_serves(self, role: Role) -> None:
        spec: RoleSpec = role_module(role).SPEC
        assert Manifest.load().graph_factory(spec.graph) is getattr(entrypoints, spec.graph)

    def test_its_tools_are_registered_once_each(self, role: Role) -> None:
        tools = role_module(role).SPEC.tools
        assert len(set(tools)) == len(tools)
        assert set(tools) <= REGISTRY.keys()

    def test_its_worker_service_names_it(self, role: Role) -> None:
        service = importlib.import_module(f"services.{role.value}_worker")
        assert service.service.name == f"{role.value}-worker"
        assert service.SPEC is role_module(role).SPEC


class TestDifferences:
    def test_only_the_coder_keeps_its_checkout_and_pauses_at_a_spend_limit(self) -> None:
        specs = {role: role_module(role).SPEC for role in Role}
        coder, reviewer, analyzer = specs[Role.CODER], specs[Role.REVIEWER], specs[Role.ANALYZER]
        assert (coder.prepare, coder.inbox_at_start, coder.snapshots, coder.changes, coder.pauses) == (
            None,
            False,
            True,
            True,
            True,
        )
        for spec in (reviewer, analyzer):
            assert spec.prepare is not None
            assert (spec.inbox_at_start, spec.snapshots, spec.changes, spec.pauses) == (True, False, False, False)
