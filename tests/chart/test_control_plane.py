"""The rendered chart keeps sandbox pods away from the control plane and gives each service its
own NATS user and the Valkey password, from Secrets."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

import pytest

from drydock.bus.permissions import PROVISIONER, nats_authorization, password_variables, service_permissions
from tests.chart.conftest import CHART, NAMESPACE, Manifest, Render, of_kind

SANDBOX_NAMESPACE = "drydock-sandboxes"
SANDBOX_POD = {"app.kubernetes.io/name": "drydock-sandbox", "app.kubernetes.io/managed-by": "drydock"}


@dataclass(frozen=True)
class Target:
    what: str
    port: int
    protocol: str = "TCP"
    ip: str = "10.0.0.10"
    namespace: dict[str, str] = field(default_factory=dict)
    pod: dict[str, str] | None = None
    """None: not a pod (an address outside the cluster's pods)."""


def _selects(selector: dict[str, Any] | None, labels: dict[str, str] | None) -> bool:
    if selector is None:
        return True
    assert set(selector) <= {"matchLabels"}, f"the evaluator reads matchLabels only: {selector}"
    if labels is None:
        return False
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())


def _peer_admits(peer: dict[str, Any], target: Target) -> bool:
    if "ipBlock" in peer:
        block = peer["ipBlock"]
        address = ipaddress.ip_address(target.ip)
        inside = address in ipaddress.ip_network(block["cidr"])
        return inside and not any(address in ipaddress.ip_network(cidr) for cidr in block.get("except", []))
    if target.pod is None:
        return False
    if "namespaceSelector" not in peer:
        # A pod selector alone selects pods of the policy's own namespace.
        return target.namespace.get("kubernetes.io/metadata.name") == SANDBOX_NAMESPACE and _selects(
            peer.get("podSelector"), target.pod
        )
    return _selects(peer["namespaceSelector"], target.namespace) and _selects(peer.get("podSelector"), target.pod)


def _port_admits(ports: list[dict[str, Any]] | None, target: Target) -> bool:
    if not ports:
        return True
    return any(
        port.get("protocol", "TCP") == target.protocol and port.get("port") in (None, target.port) for port in ports
    )


def sandbox_may_reach(manifests: list[Manifest], target: Target, pod: dict[str, str] = SANDBOX_POD) -> list[str]:
    """The NetworkPolicies that let a pod of the sandbox namespace with labels ``pod`` (a
    sandbox pod's unless given) open a connection to ``target``."""
    admitting = []
    for policy in of_kind(manifests, "NetworkPolicy"):
        spec = policy["spec"]
        if policy["metadata"]["namespace"] != SANDBOX_NAMESPACE or "Egress" not in spec.get("policyTypes", []):
            continue
        if not _selects(spec["podSelector"] or None, pod):
            continue
        for rule in spec.get("egress", []):
            peers = rule.get("to") or [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"namespaceSelector": {}}]
            if any(_peer_admits(peer, target) for peer in peers) and _port_admits(rule.get("ports"), target):
                admitting.append(policy["metadata"]["name"])
    return admitting


def release_namespace() -> dict[str, str]:
    return {"kubernetes.io/metadata.name": NAMESPACE}


def control_plane(manifests: list[Manifest]) -> list[Target]:
    """NATS, Valkey, the cloud metadata address, the API server, and every Drydock pod on every
    port except the credential proxy's own."""
    targets = [
        Target("nats", 4222, namespace={"kubernetes.io/metadata.name": "nats"}, pod={"app.kubernetes.io/name": "nats"}),
        Target("nats monitoring", 8222, namespace={"kubernetes.io/metadata.name": "nats"}, pod={"app": "nats"}),
        Target("valkey", 6379, namespace={"kubernetes.io/metadata.name": "valkey"}, pod={"app": "valkey"}),
        Target("redis in the release namespace", 6379, namespace=release_namespace(), pod={"app": "redis"}),
        Target("cloud metadata", 80, ip="169.254.169.254"),
        Target("kubernetes api", 443, ip="10.96.0.1"),
        Target(
            "another sandbox's daemon",
            8484,
            namespace={"kubernetes.io/metadata.name": SANDBOX_NAMESPACE},
            pod=SANDBOX_POD,
        ),
    ]
    for deployment in of_kind(manifests, "Deployment"):
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        name = labels["app.kubernetes.io/component"]
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            for port in container.get("ports", []):
                if name == "credential-proxy" and port["name"] in ("http", "egress"):
                    continue
                targets.append(
                    Target(
                        f"{name}:{port['containerPort']}",
                        port["containerPort"],
                        namespace=release_namespace(),
                        pod=labels,
                    )
                )
        if name != "credential-proxy":
            targets.append(Target(f"{name} metrics", 9090, namespace=release_namespace(), pod=labels))
    return targets


class TestSandboxReach:
    def test_no_policy_lets_a_sandbox_reach_the_control_plane(self, manifests: list[Manifest]) -> None:
        reached = {target.what: sandbox_may_reach(manifests, target) for target in control_plane(manifests)}
        assert {what: policies for what, policies in reached.items() if policies} == {}
        assert len(reached) > 10

    def test_a_sandbox_reaches_dns_and_the_credential_proxy(self, manifests: list[Manifest]) -> None:
        (proxy,) = [d for d in of_kind(manifests, "Deployment") if d["metadata"]["name"].endswith("credential-proxy")]
        labels = proxy["spec"]["template"]["metadata"]["labels"]
        for port in (8081, 8082):
            target = Target("proxy", port, namespace=release_namespace(), pod=labels)
            assert sandbox_may_reach(manifests, target) == ["sandbox-to-credential-proxy"]
        dns = Target(
            "dns", 53, "UDP", namespace={"kubernetes.io/metadata.name": "kube-system"}, pod={"k8s-app": "kube-dns"}
        )
        assert sandbox_may_reach(manifests, dns) == ["sandbox-dns"]

    def test_extra_egress_to_everything_would_be_seen(self, render: Render) -> None:
        # The check itself: a policy that opens everything is caught.
        opened = render(set={"sandbox.networkPolicy.extraEgress[0].to[0].ipBlock.cidr": "0.0.0.0/0"})
        reached = [t.what for t in control_plane(opened) if sandbox_may_reach(opened, t)]
        assert "cloud metadata" in reached


def environment(container: Manifest) -> dict[str, Manifest]:
    return {variable["name"]: variable for variable in container["env"]}


class TestCredentials:
    def test_each_service_connects_as_its_own_nats_user(self, manifests: list[Manifest]) -> None:
        users = set(service_permissions())
        for deployment in of_kind(manifests, "Deployment"):
            name = deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
            assert name in users, f"{name} has no NATS user in drydock.bus.permissions"
            env = environment(deployment["spec"]["template"]["spec"]["containers"][0])
            assert env["DRYDOCK_NATS_USER"]["value"] == name
            assert env["DRYDOCK_NATS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
                "name": "drydock-nats-users",
                "key": name,
            }
            assert env["DRYDOCK_NATS_PROVISION"]["value"] == "false"

    def test_the_streams_are_provisioned_first_as_the_provisioner(self, manifests: list[Manifest]) -> None:
        for deployment in of_kind(manifests, "Deployment"):
            (init,) = deployment["spec"]["template"]["spec"]["initContainers"]
            assert init["args"] == ["provision"]
            env = environment(init)
            assert env["DRYDOCK_NATS_USER"]["value"] == PROVISIONER
            assert env["DRYDOCK_NATS_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == PROVISIONER
            assert not any("value" in variable and "PASSWORD" in name for name, variable in env.items())
            # Provisioning writes the store epoch too, so the step reaches Redis as the services do.
            service = environment(deployment["spec"]["template"]["spec"]["containers"][0])
            for name in ("DRYDOCK_REDIS_URL", "DRYDOCK_REDIS_USERNAME", "DRYDOCK_REDIS_PASSWORD"):
                assert env[name] == service[name], name

    def test_valkey_user_and_password_come_from_a_secret(self, manifests: list[Manifest]) -> None:
        for deployment in of_kind(manifests, "Deployment"):
            env = environment(deployment["spec"]["template"]["spec"]["containers"][0])
            assert env["DRYDOCK_REDIS_USERNAME"]["value"] == "drydock"
            assert env["DRYDOCK_REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
                "name": "drydock-redis",
                "key": "password",
            }

    @pytest.mark.parametrize("setting", ["nats.usersSecret=", "redis.passwordSecret=null"])
    def test_without_the_secrets_nothing_refers_to_them(self, render: Render, setting: str) -> None:
        key, value = setting.split("=")
        rendered = render(set={key: value})
        for deployment in of_kind(rendered, "Deployment"):
            spec = deployment["spec"]["template"]["spec"]
            env = environment(spec["containers"][0])
            if key.startswith("nats"):
                assert "initContainers" not in spec
                assert "DRYDOCK_NATS_USER" not in env
                assert "DRYDOCK_NATS_PROVISION" not in env
            else:
                assert "DRYDOCK_REDIS_PASSWORD" not in env


class TestReadme:
    def test_the_nats_snippet_is_what_drydock_prints(self) -> None:
        readme = (CHART / "README.md").read_text()
        snippet = readme.split("Its first users read:\n\n```\n", 1)[1].split("```", 1)[0]
        printed = nats_authorization(password_variables())
        for user_block in snippet.split("    {user: ")[1:]:
            assert "    {user: " + user_block.rstrip() in printed
        assert snippet.startswith("authorization {\n  users = [\n")
