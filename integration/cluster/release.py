"""A Drydock release on a real cluster (``KUBECONFIG``), from a fresh start: NATS and Valkey as
pods from ``infra.yaml`` with credentials made for the run, the Secrets, ``helm install --wait``;
and removing it all again. Shared by ``integration/test_cluster.py``, the whole-path scenario
(``integration/test_whole_path.py``) and ``pdm run bench cluster_path``.

On a cluster older than the chart's ``kubeVersion`` (the lab runs v1.20), a copy of the chart
with that range widened is installed, and the caller is told so: the chart's own range stays
truthful.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.fernet import Fernet

from drydock.bus.permissions import nats_authorization, service_permissions
from drydock.embedded import REDIS_USER
from tools.helm import HelmUnavailable, install

ROOT = Path(__file__).resolve().parent.parent.parent
CHART = ROOT / "charts" / "drydock"
INFRA_MANIFEST = ROOT / "integration" / "cluster" / "infra.yaml"
SUPPORTED = re.compile(r'^kubeVersion:\s*">=(\d+)\.(\d+)', re.MULTILINE)


class ClusterUnavailable(RuntimeError):
    """No cluster to run on, or no tool to reach it with; the message says which (a skip reason)."""


def kubectl(*argv: str, stdin: str | None = None, check: bool = True, timeout: float = 600) -> str:
    result = subprocess.run(
        ["kubectl", *argv], input=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(argv)}: {result.stderr.strip()}")
    return result.stdout


def helm_binary() -> Path:
    """Helm (installed by ``tools.helm`` when missing), or :class:`ClusterUnavailable` saying why not."""
    if not os.environ.get("KUBECONFIG"):
        raise ClusterUnavailable("no Kubernetes cluster: KUBECONFIG is not set")
    if shutil.which("kubectl") is None:
        raise ClusterUnavailable("kubectl is not on PATH (python -m tools.helm version puts one in .tools/bin)")
    try:
        return install()
    except HelmUnavailable as error:
        raise ClusterUnavailable(f"helm cannot be installed here: {error}") from None


def server_version() -> tuple[int, int]:
    version = json.loads(kubectl("version", "-o", "json"))["serverVersion"]
    return int(version["major"]), int(re.sub(r"\D", "", version["minor"]))


def chart_for_cluster(scratch: Path) -> Path:
    """The chart, or a copy under ``scratch`` with ``kubeVersion`` widened when the cluster is
    older than its range (printed, so the run says so)."""
    found = SUPPORTED.search((CHART / "Chart.yaml").read_text())
    assert found is not None, "Chart.yaml has no kubeVersion lower bound"
    minimum = int(found.group(1)), int(found.group(2))
    server = server_version()
    if server >= minimum:
        return CHART
    print(
        f"the cluster runs Kubernetes {server[0]}.{server[1]}, older than the chart's {minimum[0]}.{minimum[1]}: "
        "installing a copy with kubeVersion widened"
    )
    copy = scratch / "drydock"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(CHART, copy)
    chart_yaml = copy / "Chart.yaml"
    chart_yaml.write_text(re.sub(r"^kubeVersion:.*$", 'kubeVersion: ">=1.20.0-0"', chart_yaml.read_text(), flags=re.M))
    return copy


def apply_secret(namespace: str, name: str, values: Mapping[str, str]) -> None:
    """A Secret built from ``values`` (file contents or passwords), through stdin, never argv."""
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {key: base64.b64encode(value.encode()).decode() for key, value in values.items()},
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(body))


@dataclass
class Release:
    """One release and its three namespaces; ``nats_passwords``, ``redis_password`` and
    ``encryption_key`` are made by :meth:`install` (the provisioner's NATS user is what a test
    observes the bus as)."""

    name: str
    namespace: str
    infra_namespace: str
    sandbox_namespace: str
    webhook_secret: str = "integration-webhook-secret"
    nats_passwords: dict[str, str] = field(default_factory=dict, repr=False)
    redis_password: str = field(default="", repr=False)
    encryption_key: str = field(default="", repr=False)

    @property
    def infra_domain(self) -> str:
        return f"{self.infra_namespace}.svc.cluster.local"

    def _control_plane_credentials(self) -> None:
        """Fresh passwords: the servers' configuration in the infra namespace, the services' in the release's."""
        self.nats_passwords = {user: secrets.token_urlsafe(24) for user in service_permissions()}
        self.redis_password = secrets.token_urlsafe(24)
        nats_conf = (
            'listen: "0.0.0.0:4222"\nhttp: "0.0.0.0:8222"\n'
            'jetstream { store_dir: "/data/jetstream" }\n' + nats_authorization(self.nats_passwords)
        )
        acl = f"user default off\nuser {REDIS_USER} on >{self.redis_password} ~* &* +@all\n"
        apply_secret(self.infra_namespace, "nats-config", {"nats.conf": nats_conf})
        apply_secret(self.infra_namespace, "valkey-acl", {"users.acl": acl})
        apply_secret(self.namespace, "drydock-nats-users", self.nats_passwords)
        apply_secret(self.namespace, "drydock-redis", {"password": self.redis_password})

    def delete_namespaces(self) -> None:
        for namespace in (self.namespace, self.infra_namespace, self.sandbox_namespace):
            kubectl(
                "delete", "namespace", namespace, "--ignore-not-found", "--wait=true", "--timeout=180s", check=False
            )

    def uninstall(self, helm: Path) -> None:
        subprocess.run([helm, "uninstall", self.name, "-n", self.namespace, "--wait"], capture_output=True, check=False)
        self.delete_namespaces()

    def install(
        self,
        helm: Path,
        chart: Path,
        *,
        secret: Mapping[str, str] = {},
        values: Sequence[Path] = (),
        settings: Sequence[str] = (),
    ) -> None:
        """From a fresh start: NATS and Valkey pods, the Secrets (``secret`` adds keys to the
        ``drydock`` one), ``helm install --wait`` with the dev and lab values, then ``values``
        files and ``settings`` (``--set``)."""
        self.uninstall(helm)
        kubectl("create", "namespace", self.infra_namespace)
        kubectl("create", "namespace", self.namespace)
        self._control_plane_credentials()
        kubectl("-n", self.infra_namespace, "apply", "-f", str(INFRA_MANIFEST))
        kubectl(
            "-n", self.infra_namespace, "wait", "--for=condition=available", "deployment", "--all", "--timeout=300s"
        )
        self.encryption_key = Fernet.generate_key().decode()
        apply_secret(
            self.namespace,
            "drydock",
            {
                "encryption-keys": json.dumps([self.encryption_key]),
                "github-webhook-secret": self.webhook_secret,
                "model-api-key": "integration",
                **secret,
            },
        )
        infra = self.infra_domain
        argv = [
            str(helm), "install", self.name, str(chart), "-n", self.namespace, "--wait", "--timeout", "10m",
            "-f", str(CHART / "dev-values.yaml"), "-f", str(CHART / "lab-values.yaml"),
            "--set", f"nats.url=nats://nats.{infra}:4222",
            "--set", f"nats.monitoringEndpoint=nats.{infra}:8222",
            "--set", f"redis.url=redis://valkey.{infra}:6379/0",
            "--set", f"sandbox.namespace={self.sandbox_namespace}",
        ]  # fmt: skip
        for path in values:
            argv += ["-f", str(path)]
        for setting in settings:
            argv += ["--set", setting]
        installed = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
        if installed.returncode != 0:
            pods = kubectl("-n", self.namespace, "get", "pods", "-o", "wide", check=False)
            raise AssertionError(f"helm install failed: {installed.stderr.strip()}\n{pods}")

    def cluster_ip(self, service: str, namespace: str | None = None) -> str:
        """A Service's ClusterIP (reachable from this machine through kube-proxy)."""
        return kubectl("-n", namespace or self.namespace, "get", "service", service, "-o", "jsonpath={.spec.clusterIP}")
