"""Drydock installed with Helm on a real cluster (``KUBECONFIG``), from a fresh start.

The images come from ``pdm run images`` (``--base debootstrap --infra --load containerd:SOCKET``
on the k8s lab; ``--infra --load kind`` on kind). NATS and Valkey run as pods from
``integration/cluster/infra.yaml``, with credentials made for this run: one NATS user per
service with the permissions of ``drydock nats-permissions``, and the Valkey ACL user Drydock
connects as (``lab-values.yaml`` wires both through the chart). The release and its namespaces are this run's own
(``drydock-it``, ``drydock-it-infra``, ``drydock-it-sandboxes``) and are removed at the end.

On a cluster older than the chart's ``kubeVersion`` (the lab runs v1.20), a copy of the chart
with that range widened is installed, and the run says so: the chart's own range stays truthful.
On the lab, ``python -m integration.cluster.lab_network`` must run beside it (Services, DNS and
the API server from pods; see that module).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.cluster.release import ClusterUnavailable, Release, chart_for_cluster, helm_binary, kubectl

RELEASE = "drydock-it"
NAMESPACE = "drydock-it"
SANDBOX_NAMESPACE = f"{NAMESPACE}-sandboxes"
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def helm() -> Path:
    try:
        return helm_binary()
    except ClusterUnavailable as reason:
        pytest.skip(str(reason))


@pytest.fixture(scope="module")
def release(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh release: NATS and Valkey pods, the Secret, ``helm install --wait``; removed afterwards."""
    release = Release(RELEASE, NAMESPACE, f"{NAMESPACE}-infra", SANDBOX_NAMESPACE)
    try:
        release.install(helm, chart_for_cluster(tmp_path_factory.mktemp("chart")))
        yield RELEASE
    finally:
        release.uninstall(helm)


def _helm_test(helm: Path, release: str, test: str) -> subprocess.CompletedProcess[str]:
    """``helm test`` of the one test pod named ``test`` (after the release's prefix), with its logs."""
    return subprocess.run(
        [helm, "test", release, "-n", NAMESPACE, "--logs", "--timeout", "5m", f"--filter=name={release}-test-{test}"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def _nodes() -> list[str]:
    return sorted(node["metadata"]["name"] for node in json.loads(kubectl("get", "nodes", "-o", "json"))["items"])


class TestHelmInstall:
    def test_every_deployment_becomes_ready(self, release: str) -> None:
        deployments = json.loads(kubectl("-n", NAMESPACE, "get", "deployments", "-o", "json"))["items"]
        names = {d["metadata"]["name"] for d in deployments}
        assert names == {
            f"{RELEASE}-{name}"
            for name in (
                "ingress", "dashboard", "credential-proxy", "coder-worker",
                "reviewer-worker", "analyzer-worker", "autofix-controller",
            )
        }  # fmt: skip
        for deployment in deployments:
            status = deployment["status"]
            assert status.get("readyReplicas") == deployment["spec"]["replicas"], deployment["metadata"]["name"]

    def test_helm_test_checks_readiness_and_a_webhook_round_trip(self, helm: Path, release: str) -> None:
        result = _helm_test(helm, release, "round-trip")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "signed delivery: 200" in result.stdout
        assert "forged delivery: 401" in result.stdout
        assert result.stdout.count("/readyz: 200") == 3

    def test_helm_test_says_whether_the_network_confines_sandbox_pods(self, helm: Path, release: str) -> None:
        """The isolation check's verdict agrees with what it reports reaching, and it always
        reaches the credential proxy; on the k8s lab, whose bridge enforces no NetworkPolicy, it
        fails, naming NATS, Valkey and the web Services."""
        result = _helm_test(helm, release, "sandbox-isolation")
        lines = kubectl("-n", SANDBOX_NAMESPACE, "logs", f"{release}-test-sandbox-isolation").splitlines()
        print("\n".join(lines))
        outcomes = {
            target.rsplit(" ", 1)[0]: outcome
            for target, _, outcome in (line.rpartition(": ") for line in lines if not line.startswith("FAILED"))
        }
        assert outcomes.pop("the credential proxy") == "connected"
        reached = {target for target, outcome in outcomes.items() if outcome == "connected"}
        assert {"NATS", "Valkey", "the Kubernetes API", "the ingress Service"} <= set(outcomes), outcomes
        assert (result.returncode == 0) is (not reached), result.stdout + result.stderr
        if _nodes() == ["lab-node"]:
            assert {"NATS", "Valkey", "the ingress Service", "the dashboard Service"} <= reached, outcomes
