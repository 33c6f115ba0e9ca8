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

import base64
import json
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from drydock.bus.permissions import nats_authorization, service_permissions
from drydock.infra.embedded import REDIS_USER
from tools.helm import HelmUnavailable, install

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "drydock"
RELEASE = "drydock-it"
NAMESPACE = "drydock-it"
INFRA_NAMESPACE = "drydock-it-infra"
SANDBOX_NAMESPACE = "drydock-it-sandboxes"
WEBHOOK_SECRET = "integration-webhook-secret"
pytestmark = pytest.mark.timeout(1800)

SUPPORTED = re.compile(r'^kubeVersion:\s*">=(\d+)\.(\d+)', re.MULTILINE)


def _kubectl(*argv: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["kubectl", *argv], input=stdin, capture_output=True, text=True, timeout=600, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(argv)}: {result.stderr.strip()}")
    return result


def _server_version() -> tuple[int, int]:
    version = json.loads(_kubectl("version", "-o", "json").stdout)["serverVersion"]
    return int(version["major"]), int(re.sub(r"\D", "", version["minor"]))


@pytest.fixture(scope="module")
def helm() -> Path:
    if not os.environ.get("KUBECONFIG"):
        pytest.skip("no Kubernetes cluster: KUBECONFIG is not set")
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not on PATH (python -m tools.helm version puts one in .tools/bin)")
    try:
        return install()
    except HelmUnavailable as error:
        pytest.skip(f"helm cannot be installed here: {error}")


@pytest.fixture(scope="module")
def chart(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The chart, or a copy with ``kubeVersion`` widened when the cluster is older than its range."""
    found = SUPPORTED.search((CHART / "Chart.yaml").read_text())
    assert found is not None, "Chart.yaml has no kubeVersion lower bound"
    minimum = int(found.group(1)), int(found.group(2))
    server = _server_version()
    if server >= minimum:
        return CHART
    print(
        f"the cluster runs Kubernetes {server[0]}.{server[1]}, older than the chart's {minimum[0]}.{minimum[1]}: "
        "installing a copy with kubeVersion widened"
    )
    copy = tmp_path_factory.mktemp("chart") / "drydock"
    shutil.copytree(CHART, copy)
    chart_yaml = copy / "Chart.yaml"
    chart_yaml.write_text(re.sub(r"^kubeVersion:.*$", 'kubeVersion: ">=1.20.0-0"', chart_yaml.read_text(), flags=re.M))
    return copy


def _secret(namespace: str, name: str, values: dict[str, str]) -> None:
    """A Secret built from ``values`` (file contents or passwords), through stdin, never argv."""
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {key: base64.b64encode(value.encode()).decode() for key, value in values.items()},
    }
    _kubectl("apply", "-f", "-", stdin=json.dumps(body))


def _control_plane_credentials() -> None:
    """Fresh passwords: the servers' configuration in the infra namespace, the services' in the release's."""
    passwords = {user: secrets.token_urlsafe(24) for user in service_permissions()}
    redis_password = secrets.token_urlsafe(24)
    nats_conf = (
        'listen: "0.0.0.0:4222"\nhttp: "0.0.0.0:8222"\n'
        'jetstream { store_dir: "/data/jetstream" }\n' + nats_authorization(passwords)
    )
    acl = f"user default off\nuser {REDIS_USER} on >{redis_password} ~* &* +@all\n"
    _secret(INFRA_NAMESPACE, "nats-config", {"nats.conf": nats_conf})
    _secret(INFRA_NAMESPACE, "valkey-acl", {"users.acl": acl})
    _secret(NAMESPACE, "drydock-nats-users", passwords)
    _secret(NAMESPACE, "drydock-redis", {"password": redis_password})


def _delete_namespaces() -> None:
    for namespace in (NAMESPACE, INFRA_NAMESPACE, SANDBOX_NAMESPACE):
        _kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=true", "--timeout=180s", check=False)


@pytest.fixture(scope="module")
def release(helm: Path, chart: Path) -> Iterator[str]:
    """A fresh release: NATS and Valkey pods, the Secret, ``helm install --wait``; removed afterwards."""
    subprocess.run([helm, "uninstall", RELEASE, "-n", NAMESPACE, "--wait"], capture_output=True, check=False)
    _delete_namespaces()
    try:
        _kubectl("create", "namespace", INFRA_NAMESPACE)
        _kubectl("create", "namespace", NAMESPACE)
        _control_plane_credentials()
        _kubectl("-n", INFRA_NAMESPACE, "apply", "-f", str(ROOT / "integration" / "cluster" / "infra.yaml"))
        _kubectl("-n", INFRA_NAMESPACE, "wait", "--for=condition=available", "deployment", "--all", "--timeout=300s")
        _kubectl(
            "-n", NAMESPACE, "create", "secret", "generic", "drydock",
            f"--from-literal=encryption-keys={json.dumps([Fernet.generate_key().decode()])}",
            f"--from-literal=github-webhook-secret={WEBHOOK_SECRET}",
            "--from-literal=model-api-key=integration",
        )  # fmt: skip
        infra = f"{INFRA_NAMESPACE}.svc.cluster.local"
        installed = subprocess.run(
            [
                helm, "install", RELEASE, str(chart), "-n", NAMESPACE, "--wait", "--timeout", "10m",
                "-f", str(CHART / "dev-values.yaml"), "-f", str(CHART / "lab-values.yaml"),
                "--set", f"nats.url=nats://nats.{infra}:4222",
                "--set", f"nats.monitoringEndpoint=nats.{infra}:8222",
                "--set", f"redis.url=redis://valkey.{infra}:6379/0",
                "--set", f"sandbox.namespace={SANDBOX_NAMESPACE}",
            ],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        if installed.returncode != 0:
            pods = _kubectl("-n", NAMESPACE, "get", "pods", "-o", "wide", check=False).stdout
            raise AssertionError(f"helm install failed: {installed.stderr.strip()}\n{pods}")
        yield RELEASE
    finally:
        subprocess.run([helm, "uninstall", RELEASE, "-n", NAMESPACE, "--wait"], capture_output=True, check=False)
        _delete_namespaces()


class TestHelmInstall:
    def test_every_deployment_becomes_ready(self, release: str) -> None:
        deployments = json.loads(_kubectl("-n", NAMESPACE, "get", "deployments", "-o", "json").stdout)["items"]
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
        result = subprocess.run(
            [helm, "test", release, "-n", NAMESPACE, "--logs", "--timeout", "5m"],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        assert "signed delivery: 200" in result.stdout
        assert "forged delivery: 401" in result.stdout
        assert result.stdout.count("/readyz: 200") == 3
