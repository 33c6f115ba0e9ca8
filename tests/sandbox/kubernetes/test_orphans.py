"""The rule that picks the sandbox pods whose records are gone, for the reaper."""

from __future__ import annotations

from typing import Any

from drydock.sandbox.providers.kubernetes import naming
from drydock.sandbox.providers.kubernetes.orphans import orphan_pods


def pod(name: str, **labels: str) -> dict[str, Any]:
    base = {naming.SANDBOX_LABEL: name, naming.MANAGED_BY_LABEL: naming.MANAGED_BY, naming.APP_LABEL: naming.APP}
    return {"metadata": {"name": name, "labels": base | labels}}


def names(pods: list[Any]) -> list[str]:
    return [found["metadata"]["name"] for found in pods]


class TestOrphanPods:
    def test_a_sandbox_pod_without_a_record_is_an_orphan(self) -> None:
        assert names(orphan_pods([pod("sbx-a"), pod("sbx-b")], recorded={"sbx-a"}, pooled=set())) == ["sbx-b"]

    def test_warm_pool_members_are_not_orphans(self) -> None:
        assert orphan_pods([pod("sbx-idle")], recorded=set(), pooled={"sbx-idle"}) == []

    def test_pods_without_the_sandbox_labels_are_never_orphans(self) -> None:
        mislabelled = pod("sbx-c", **{naming.SANDBOX_LABEL: "sbx-other"})
        foreign = pod("sbx-d", **{naming.MANAGED_BY_LABEL: "helm"})
        unlabelled: dict[str, Any] = {"metadata": {"name": "sbx-e"}}
        assert orphan_pods([mislabelled, foreign, unlabelled], recorded=set(), pooled=set()) == []
