"""The chart's ``helm test`` pods (templates/tests/): run on the lab by
integration/test_cluster.py; here, what they check is pinned on the rendered output, and the
isolation check's script is run against sockets of this machine."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from drydock.sandbox.providers.kubernetes.orphans import is_sandbox_pod
from tests.chart.conftest import Manifest, Render, named
from tests.chart.test_control_plane import (
    SANDBOX_NAMESPACE,
    Target,
    control_plane,
    release_namespace,
    sandbox_may_reach,
)


def _test_pods(manifests: list[Manifest]) -> dict[str, Manifest]:
    """The ``helm test`` pods by name, without the release's prefix."""
    return {
        m["metadata"]["name"].removeprefix("drydock-test-"): m
        for m in manifests
        if m["kind"] == "Pod" and m["metadata"].get("annotations", {}).get("helm.sh/hook")
    }


def _test_pod(manifests: list[Manifest]) -> Manifest:
    return _test_pods(manifests)["round-trip"]


class TestHelmTest:
    def test_it_is_a_test_hook_without_an_api_token(self, manifests: list[Manifest]) -> None:
        pod = _test_pod(manifests)
        assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
        assert pod["spec"]["automountServiceAccountToken"] is False
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True

    def test_it_checks_every_web_service_and_the_webhook_path(self, manifests: list[Manifest]) -> None:
        pod = _test_pod(manifests)
        (container,) = pod["spec"]["containers"]
        env = {e["name"]: e for e in container["env"]}
        web = {
            m["metadata"]["name"]: m["spec"]["ports"][0]["port"]
            for m in manifests
            if m["kind"] == "Service" and m["metadata"]["namespace"] == "drydock"
        }
        assert web, "no web Service rendered"
        assert set(env["READY_URLS"]["value"].split()) == {
            f"http://{name}.drydock.svc.cluster.local:{port}/readyz" for name, port in web.items()
        }
        assert (
            env["INGRESS_URL"]["value"] == f"http://drydock-ingress.drydock.svc.cluster.local:{web['drydock-ingress']}"
        )
        assert env["WEBHOOK_SECRET"]["valueFrom"]["secretKeyRef"]["optional"] is True
        script = container["command"][-1]
        assert "forged.status_code != 401" in script
        assert "/webhooks/github" in script


def _listening() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


def _closed() -> socket.socket:
    """A bound port nothing listens on: a connection to it is refused."""
    bound = socket.socket()
    bound.bind(("127.0.0.1", 0))
    return bound


def _address(sock: socket.socket) -> str:
    host, port = sock.getsockname()
    return f"{host}:{port}"


class TestSandboxIsolationCheck:
    def test_it_is_a_sandbox_to_the_policies_and_none_to_the_reaper(self, manifests: list[Manifest]) -> None:
        pod = _test_pods(manifests)["sandbox-isolation"]
        assert pod["metadata"]["namespace"] == SANDBOX_NAMESPACE
        labels = pod["metadata"]["labels"]
        proxy = named(manifests, "Deployment", "drydock-credential-proxy")["spec"]["template"]["metadata"]["labels"]
        dns = Target(
            "dns", 53, "UDP", namespace={"kubernetes.io/metadata.name": "kube-system"}, pod={"k8s-app": "kube-dns"}
        )
        targets = [*control_plane(manifests), Target("proxy", 8081, namespace=release_namespace(), pod=proxy), dns]
        assert {t.what: sandbox_may_reach(manifests, t, labels) for t in targets} == {
            t.what: sandbox_may_reach(manifests, t) for t in targets
        }
        assert not is_sandbox_pod(pod)
        assert pod["spec"]["automountServiceAccountToken"] is False

    def test_it_tries_the_control_plane_and_the_proxy(self, default_manifests: list[Manifest]) -> None:
        (container,) = _test_pods(default_manifests)["sandbox-isolation"]["spec"]["containers"]
        env = {e["name"]: e["value"] for e in container["env"]}
        forbidden = json.loads(env["FORBIDDEN"])
        assert forbidden["NATS"] == "nats.nats.svc.cluster.local:4222"
        assert forbidden["Valkey"] == "valkey.valkey.svc.cluster.local:6379"
        assert forbidden["the cloud metadata address"] == "169.254.169.254:80"
        assert forbidden["the Kubernetes API"] == "kubernetes.default.svc:443"
        assert forbidden["the ingress Service"] == "drydock-ingress.drydock.svc.cluster.local:8000"
        assert env["PROXY"] == "drydock-credential-proxy.drydock.svc.cluster.local:8081"

    def test_a_url_without_a_port_gets_the_default_and_a_url_from_a_secret_is_left_out(self, render: Render) -> None:
        rendered = render(
            set={"nats.url": "nats://nats.example", "redis.urlSecret.name": "r", "redis.urlSecret.key": "url"}
        )
        (container,) = _test_pods(rendered)["sandbox-isolation"]["spec"]["containers"]
        forbidden = json.loads({e["name"]: e["value"] for e in container["env"]}["FORBIDDEN"])
        assert forbidden["NATS"] == "nats.example:4222"
        assert "Valkey" not in forbidden

    def test_it_can_be_left_out(self, render: Render) -> None:
        assert "sandbox-isolation" not in _test_pods(render(set={"sandbox.networkPolicy.checkEnforced": "false"}))

    @pytest.mark.parametrize(
        ("reachable", "proxy_up", "passes"),
        [(False, True, True), (True, True, False), (False, False, False)],
        ids=["confined", "a forbidden address answers", "the proxy does not answer"],
    )
    def test_its_script(self, default_manifests: list[Manifest], reachable: bool, proxy_up: bool, passes: bool) -> None:
        (container,) = _test_pods(default_manifests)["sandbox-isolation"]["spec"]["containers"]
        with (
            _listening() if reachable else _closed() as forbidden,
            _listening() if proxy_up else _closed() as proxy,
        ):
            address = _address(forbidden)
            result = subprocess.run(
                [sys.executable, *container["command"][1:]],
                env={"FORBIDDEN": json.dumps({"Valkey": address}), "PROXY": _address(proxy)},
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        assert (result.returncode == 0) is passes, result.stdout + result.stderr
        assert f"Valkey {address}: {'connected' if reachable else 'not connected'}" in result.stdout
