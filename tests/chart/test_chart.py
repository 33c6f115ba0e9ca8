"""The Helm chart: it lints strictly, renders with the default values and with every option on,
every manifest is valid for current Kubernetes, and the rendered output keeps its promises."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import kubernetes_validate  # type: ignore[import-untyped]
import promql_parser
import pytest
from cryptography.fernet import Fernet
from prometheus_client import generate_latest

from drydock.bus.streams import RUNS_STREAM, run_consumer
from drydock.config import Settings, load_settings
from drydock.roles import Role
from drydock.sandbox.providers.kubernetes import naming, rbac
from drydock.sandbox.providers.kubernetes.manifests import sandbox_pod
from drydock.telemetry import REGISTRY
from tests.chart.conftest import CHART, DEVELOPMENT, EVERYTHING, RELEASE, Manifest, Render, named, of_kind, run_helm

METRIC_MODULES = (
    "services.ingress.metrics",
    "services.credential_proxy.metrics",
    "drydock.worker.metrics",
    "drydock.sandbox.metrics",
    "drydock.channels.github.redelivery",
    "drydock.usage.metrics",
    "drydock.autofix.metrics",
)
"""Where the services declare their Prometheus metrics."""
KUBERNETES_VERSIONS = ("1.35.0", kubernetes_validate.latest_version())
"""The release current when this was written, and the newest the validator knows."""
CUSTOM_RESOURCES = {("keda.sh/v1alpha1", "ScaledObject"), ("monitoring.coreos.com/v1", "PrometheusRule")}
"""Kinds with no bundled schema; their shape is checked by the tests below instead."""
SECRET_VARIABLES = {
    "DRYDOCK_GITHUB_PRIVATE_KEY",
    "DRYDOCK_GITHUB_WEBHOOK_SECRET",
    "DRYDOCK_CRYPTO_KEYS",
    "DRYDOCK_MODELS_API_KEY",
    "DRYDOCK_SLACK_BOT_TOKEN",
    "DRYDOCK_SLACK_SIGNING_SECRET",
    "DRYDOCK_LINEAR_API_KEY",
    "DRYDOCK_LINEAR_WEBHOOK_SECRET",
    "DRYDOCK_DASHBOARD_GITHUB_CLIENT_SECRET",
}
SANDBOX_NAMESPACE = "drydock-sandboxes"
SANDBOX_PODS = {naming.APP_LABEL: naming.APP, naming.MANAGED_BY_LABEL: naming.MANAGED_BY}


def containers(deployment: Manifest) -> list[Manifest]:
    spec = deployment["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def component(manifest: Manifest) -> str:
    return str(manifest["metadata"]["labels"]["app.kubernetes.io/component"])


def in_sandbox_namespace(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in of_kind(manifests, kind) if m["metadata"].get("namespace") == SANDBOX_NAMESPACE]


class TestLint:
    @pytest.mark.parametrize(
        "values",
        [[], ["--values", str(EVERYTHING)], ["--values", str(DEVELOPMENT)]],
        ids=["default", "everything", "development"],
    )
    def test_lint_is_strictly_clean(self, helm: Path, values: list[str]) -> None:
        result = run_helm(helm, "lint", "--strict", str(CHART), *values)
        assert result.returncode == 0, result.stdout + result.stderr

    def test_the_schema_refuses_a_secret_as_a_plain_value(self, helm: Path) -> None:
        result = run_helm(helm, "template", RELEASE, str(CHART), "--set", "env.DRYDOCK_GITHUB_PRIVATE_KEY=oops")
        assert result.returncode != 0
        assert "DRYDOCK_GITHUB_PRIVATE_KEY" in result.stderr

    def test_missing_data_store_urls_are_refused(self, helm: Path) -> None:
        result = run_helm(helm, "template", RELEASE, str(CHART), "--set", "nats.url=")
        assert result.returncode != 0
        assert "nats.url (or nats.urlSecret) is required" in result.stderr


class TestValidity:
    @pytest.mark.parametrize("values", ["default", "everything", "development"])
    @pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
    def test_every_manifest_is_valid_kubernetes(
        self, request: pytest.FixtureRequest, values: str, version: str
    ) -> None:
        manifests: list[Manifest] = request.getfixturevalue(f"{values}_manifests")
        checked = 0
        for manifest in manifests:
            if (manifest["apiVersion"], manifest["kind"]) in CUSTOM_RESOURCES:
                continue
            kubernetes_validate.validate(manifest, version, strict=True)
            checked += 1
        assert checked >= 20

    def test_everything_renders_every_optional_kind(self, everything_manifests: list[Manifest]) -> None:
        kinds = {manifest["kind"] for manifest in everything_manifests}
        assert {"Ingress", "HorizontalPodAutoscaler", "ScaledObject", "PodDisruptionBudget", "PrometheusRule"} <= kinds


class TestDeployments:
    def test_every_enabled_service_has_a_deployment_with_probes_and_limits(
        self, manifests: list[Manifest], default_values: Manifest
    ) -> None:
        deployments = {component(d): d for d in of_kind(manifests, "Deployment")}
        enabled = {name for name, service in default_values["services"].items() if service["enabled"]}
        assert set(deployments) == enabled
        for name, deployment in deployments.items():
            for container in containers(deployment):
                assert {"cpu", "memory"} <= set(container["resources"]["limits"]), name
                assert {"cpu", "memory"} <= set(container["resources"]["requests"]), name
                assert container["securityContext"]["readOnlyRootFilesystem"] is True
                assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
            (main,) = deployment["spec"]["template"]["spec"]["containers"]
            assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}, name
            assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}, name
            assert main["args"][:2] == ["serve", name]
            assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True

    def test_prometheus_scrapes_the_metrics_port_never_a_web_port(self, manifests: list[Manifest]) -> None:
        for deployment in of_kind(manifests, "Deployment"):
            name = component(deployment)
            annotations = deployment["spec"]["template"]["metadata"]["annotations"]
            ports = {
                port["name"]: port["containerPort"]
                for port in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
            }
            if name == "credential-proxy":
                assert annotations["prometheus.io/port"] == "8081"
                continue
            assert annotations["prometheus.io/port"] == "9464", name
            assert ports["metrics"] == 9464, name
            assert ports["http"] != 9464, name
        for service in of_kind(manifests, "Service"):
            assert all(port["port"] != 9464 for port in service["spec"]["ports"]), component(service)

    @pytest.mark.parametrize(("limit", "workers"), [("1", "1"), ("2", "2"), ("1500m", "2"), ("250m", "1")])
    def test_web_services_serve_from_a_process_per_core_of_their_limit(
        self, render: Render, limit: str, workers: str
    ) -> None:
        rendered = render(set={f"services.{name}.resources.limits.cpu": limit for name in ("ingress", "dashboard")})
        for deployment in of_kind(rendered, "Deployment"):
            (main,) = deployment["spec"]["template"]["spec"]["containers"]
            variables = {variable["name"]: variable.get("value") for variable in main["env"]}
            expected = workers if component(deployment) in {"ingress", "dashboard"} else None
            assert variables.get("DRYDOCK_HTTP_WORKERS") == expected, component(deployment)

    def test_traces_go_to_the_collector_when_one_is_named(
        self, default_manifests: list[Manifest], everything_manifests: list[Manifest]
    ) -> None:
        for rendered, endpoint in (
            (default_manifests, None),
            (everything_manifests, "http://otel-collector.observability.svc.cluster.local:4318"),
        ):
            for deployment in of_kind(rendered, "Deployment"):
                (main,) = deployment["spec"]["template"]["spec"]["containers"]
                variables = {variable["name"]: variable.get("value") for variable in main["env"]}
                assert variables.get("OTEL_EXPORTER_OTLP_ENDPOINT") == endpoint, component(deployment)

    def test_a_disabled_service_has_no_objects(self, render: Render) -> None:
        rendered = render(set={"services.reviewer-worker.enabled": "false"})
        assert "reviewer-worker" not in {component(d) for d in of_kind(rendered, "Deployment")}
        assert all(
            m["metadata"].get("labels", {}).get("app.kubernetes.io/component") != "reviewer-worker" for m in rendered
        )

    def test_web_services_get_services_and_workers_do_not(self, manifests: list[Manifest]) -> None:
        assert {component(s) for s in of_kind(manifests, "Service")} == {"ingress", "dashboard", "credential-proxy"}
        proxy = named(manifests, "Service", f"{RELEASE}-credential-proxy")
        assert {port["name"]: port["port"] for port in proxy["spec"]["ports"]} == {"http": 8081, "egress": 8082}

    def test_only_sandbox_clients_get_an_api_token(self, manifests: list[Manifest]) -> None:
        for deployment in of_kind(manifests, "Deployment"):
            spec = deployment["spec"]["template"]["spec"]
            client = deployment["spec"]["template"]["metadata"]["labels"].get("drydock.dev/sandbox-client") == "true"
            assert spec["automountServiceAccountToken"] is client, component(deployment)
            assert (spec.get("serviceAccountName") == RELEASE) is client

    def test_autoscaled_deployments_leave_replicas_to_the_autoscaler(self, manifests: list[Manifest]) -> None:
        scaled = {m["spec"]["scaleTargetRef"]["name"] for m in of_kind(manifests, "HorizontalPodAutoscaler")}
        scaled |= {m["spec"]["scaleTargetRef"]["name"] for m in of_kind(manifests, "ScaledObject")}
        for deployment in of_kind(manifests, "Deployment"):
            assert ("replicas" in deployment["spec"]) is (deployment["metadata"]["name"] not in scaled)
        hpa_targets = {m["spec"]["scaleTargetRef"]["name"] for m in of_kind(manifests, "HorizontalPodAutoscaler")}
        assert hpa_targets == {f"{RELEASE}-{name}" for name in ("ingress", "dashboard", "credential-proxy")}

    def test_disruption_budgets_and_ingresses_point_at_what_exists(self, manifests: list[Manifest]) -> None:
        pod_labels = [d["spec"]["template"]["metadata"]["labels"] for d in of_kind(manifests, "Deployment")]
        budgets = of_kind(manifests, "PodDisruptionBudget")
        assert budgets
        for budget in budgets:
            selector = budget["spec"]["selector"]["matchLabels"]
            assert sum(selector.items() <= labels.items() for labels in pod_labels) == 1
        services = {
            s["metadata"]["name"]: {p["name"] for p in s["spec"]["ports"]} for s in of_kind(manifests, "Service")
        }
        for ingress in of_kind(manifests, "Ingress"):
            for rule in ingress["spec"]["rules"]:
                for path in rule["http"]["paths"]:
                    backend = path["backend"]["service"]
                    assert backend["port"]["name"] in services[backend["name"]]


def worker_settings(manifests: list[Manifest], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings the coder worker reads from its rendered environment (secrets stand in)."""
    worker = named(manifests, "Deployment", f"{RELEASE}-coder-worker")
    for variable in worker["spec"]["template"]["spec"]["containers"][0]["env"]:
        value = variable.get("value")
        if value is None:
            value = {"DRYDOCK_NATS_URL": "nats://n:4222", "DRYDOCK_REDIS_URL": "redis://r:6379/0"}.get(
                variable["name"],
                json.dumps([Fernet.generate_key().decode()])
                if variable["name"] == "DRYDOCK_CRYPTO_KEYS"
                else "from-a-secret",
            )
        monkeypatch.setenv(variable["name"], value)
    return load_settings()


_UNITS = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(text: str) -> float:
    number, unit = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text)).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS.get(unit, 1.0)


class TestWorkerSettings:
    def test_a_workers_environment_is_valid_drydock_configuration(
        self, manifests: list[Manifest], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        settings = worker_settings(manifests, monkeypatch)
        assert settings.sandbox.provider == "kubernetes"
        assert settings.sandbox.kubernetes.namespace == SANDBOX_NAMESPACE
        assert settings.sandbox.kubernetes.service_account == f"{RELEASE}-sandbox"
        assert settings.proxy.url == f"http://{RELEASE}-credential-proxy.drydock.svc.cluster.local:8081"
        assert settings.proxy.egress_url == f"http://{RELEASE}-credential-proxy.drydock.svc.cluster.local:8082"
        assert (settings.http.host, settings.http.port) == ("0.0.0.0", 8000)

    def test_every_option_reaches_the_sandbox_settings(
        self, everything_manifests: list[Manifest], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        worker = named(everything_manifests, "Deployment", f"{RELEASE}-coder-worker")
        for variable in worker["spec"]["template"]["spec"]["containers"][0]["env"]:
            if variable["name"].startswith("DRYDOCK_SANDBOX_"):
                monkeypatch.setenv(variable["name"], variable["value"])
        kubernetes = load_settings().sandbox.kubernetes
        assert kubernetes.image == "registry.example.com/drydock-sandbox:1.2.3"
        assert kubernetes.image_pull_secrets == ["registry"]
        assert (kubernetes.workspace_volume, kubernetes.workspace_size) == ("pvc", "20Gi")
        assert kubernetes.workspace_storage_class == "fast-ssd"
        assert kubernetes.runtime_class == "gvisor"
        assert kubernetes.node_selector == {"pool": "sandboxes"}
        assert kubernetes.warm_pool_size == 3


class TestSandboxPodsFitTheNamespace:
    """A sandbox pod as a worker builds it from its rendered settings is admitted and reachable."""

    def test_the_pod_satisfies_the_quota_and_the_limit_range(
        self, manifests: list[Manifest], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        settings = worker_settings(manifests, monkeypatch)
        pod = sandbox_pod(settings.sandbox, sandbox_id="sbx-1", thread_id="t", labels={}, origin="create")
        (quota,) = in_sandbox_namespace(manifests, "ResourceQuota")
        (limit_range,) = in_sandbox_namespace(manifests, "LimitRange")
        maximum = limit_range["spec"]["limits"][0]["max"]
        for container in [*pod["spec"]["initContainers"], *pod["spec"]["containers"]]:
            resources = container["resources"]
            for constrained in quota["spec"]["hard"]:
                kind, _, resource = constrained.partition(".")
                if kind in ("requests", "limits"):
                    assert resource in resources[kind], f"{container['name']} lacks {constrained}"
            for resource, bound in maximum.items():
                assert quantity(resources["limits"][resource]) <= quantity(bound), (container["name"], resource)

    def test_the_pod_is_selected_by_the_policies_and_runs_as_the_sandbox_account(
        self, manifests: list[Manifest], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        settings = worker_settings(manifests, monkeypatch)
        pod = sandbox_pod(settings.sandbox, sandbox_id="sbx-1", thread_id="t", labels={}, origin="create")
        assert pod["metadata"]["namespace"] == SANDBOX_NAMESPACE
        assert SANDBOX_PODS.items() <= pod["metadata"]["labels"].items()
        daemon_policy = named(manifests, "NetworkPolicy", "workers-to-sandbox-daemon")
        port = pod["spec"]["containers"][0]["ports"][0]["containerPort"]
        assert daemon_policy["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": port}]
        account = named(manifests, "ServiceAccount", pod["spec"]["serviceAccountName"])
        assert account["metadata"]["namespace"] == SANDBOX_NAMESPACE


class TestSandboxNamespace:
    def test_pod_security_restricted_is_enforced(self, manifests: list[Manifest]) -> None:
        namespace = named(manifests, "Namespace", SANDBOX_NAMESPACE)
        labels = namespace["metadata"]["labels"]
        for mode in ("enforce", "audit", "warn"):
            assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"

    def test_the_namespace_denies_everything_by_default(self, manifests: list[Manifest]) -> None:
        policies = in_sandbox_namespace(manifests, "NetworkPolicy")
        deny = [p for p in policies if p["spec"]["podSelector"] == {}]
        assert len(deny) == 1
        assert deny[0]["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
        for policy in policies:
            if policy is not deny[0]:
                assert policy["spec"]["podSelector"] == {"matchLabels": SANDBOX_PODS}

    def test_the_only_exceptions_are_dns_the_proxy_and_workers_to_the_daemon(
        self, default_manifests: list[Manifest]
    ) -> None:
        policies = {p["metadata"]["name"]: p["spec"] for p in in_sandbox_namespace(default_manifests, "NetworkPolicy")}
        assert set(policies) == {
            "default-deny",
            "sandbox-dns",
            "sandbox-to-credential-proxy",
            "workers-to-sandbox-daemon",
        }
        dns = policies["sandbox-dns"]["egress"]
        assert [port["port"] for rule in dns for port in rule["ports"]] == [53, 53]
        proxy = policies["sandbox-to-credential-proxy"]["egress"][0]
        assert proxy["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "credential-proxy"
        assert proxy["to"][0]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "drydock"}}
        assert sorted(port["port"] for port in proxy["ports"]) == [8081, 8082]
        daemon = policies["workers-to-sandbox-daemon"]
        assert daemon["policyTypes"] == ["Ingress"]
        assert daemon["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 8484}]
        sources = daemon["ingress"][0]["from"][0]["podSelector"]["matchLabels"]
        assert sources["drydock.dev/sandbox-client"] == "true"
        clients = {
            component(d)
            for d in of_kind(default_manifests, "Deployment")
            if d["spec"]["template"]["metadata"]["labels"].get("drydock.dev/sandbox-client") == "true"
        }
        assert clients == {"coder-worker", "reviewer-worker", "analyzer-worker"}

    def test_quota_and_limit_range_bound_the_namespace(self, manifests: list[Manifest]) -> None:
        (quota,) = in_sandbox_namespace(manifests, "ResourceQuota")
        assert {"pods", "limits.cpu", "limits.memory"} <= set(quota["spec"]["hard"])
        (limits,) = in_sandbox_namespace(manifests, "LimitRange")
        assert limits["spec"]["limits"][0]["type"] == "Container"
        assert {"max", "default", "defaultRequest"} <= set(limits["spec"]["limits"][0])

    def test_sandbox_pods_run_with_an_identity_without_a_token(self, manifests: list[Manifest]) -> None:
        account = named(manifests, "ServiceAccount", f"{RELEASE}-sandbox")
        assert account["metadata"]["namespace"] == SANDBOX_NAMESPACE
        assert account["automountServiceAccountToken"] is False


class TestRole:
    @pytest.mark.parametrize(("which", "warm_pool"), [("default", False), ("everything", True)])
    def test_the_role_grants_exactly_what_the_provider_uses(
        self, request: pytest.FixtureRequest, which: str, warm_pool: bool
    ) -> None:
        rendered: list[Manifest] = request.getfixturevalue(f"{which}_manifests")
        (role,) = of_kind(rendered, "Role")
        assert role["metadata"]["namespace"] == SANDBOX_NAMESPACE
        assert role["rules"] == rbac.required_rules(warm_pool=warm_pool)
        granted = {
            (resource, verb) for rule in role["rules"] for resource in rule["resources"] for verb in rule["verbs"]
        }
        assert ("pods/exec", "create") not in granted
        assert not {verb for _, verb in granted} & {"*", "update", "deletecollection", "escalate", "bind"}
        assert not of_kind(rendered, "ClusterRole")
        assert not of_kind(rendered, "ClusterRoleBinding")

    def test_the_role_is_bound_to_the_workers_account_only(self, manifests: list[Manifest]) -> None:
        (binding,) = of_kind(manifests, "RoleBinding")
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE, "namespace": "drydock"}]
        assert binding["roleRef"]["name"] == of_kind(manifests, "Role")[0]["metadata"]["name"]


class TestSecrets:
    def test_no_secret_is_rendered_and_no_secret_value_is_plain(self, manifests: list[Manifest]) -> None:
        assert not of_kind(manifests, "Secret")
        for deployment in of_kind(manifests, "Deployment"):
            for container in containers(deployment):
                for variable in container["env"]:
                    if variable["name"] in SECRET_VARIABLES:
                        assert "value" not in variable, variable["name"]
                        assert variable["valueFrom"]["secretKeyRef"]["name"] == "drydock"

    def test_data_store_urls_come_from_secrets_when_configured(self, everything_manifests: list[Manifest]) -> None:
        for deployment in of_kind(everything_manifests, "Deployment"):
            environment = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
            assert environment["DRYDOCK_NATS_URL"]["valueFrom"]["secretKeyRef"] == {
                "name": "drydock-nats",
                "key": "url",
            }
            assert environment["DRYDOCK_REDIS_URL"]["valueFrom"]["secretKeyRef"] == {
                "name": "drydock-redis",
                "key": "url",
            }

    def test_each_secret_goes_only_to_the_services_listed(self, default_manifests: list[Manifest]) -> None:
        ingress = named(default_manifests, "Deployment", f"{RELEASE}-ingress")
        names = {v["name"] for v in ingress["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert {"DRYDOCK_GITHUB_WEBHOOK_SECRET", "DRYDOCK_SLACK_SIGNING_SECRET"} <= names
        assert "DRYDOCK_MODELS_API_KEY" not in names
        proxy = named(default_manifests, "Deployment", f"{RELEASE}-credential-proxy")
        proxy_names = {v["name"] for v in proxy["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert "DRYDOCK_GITHUB_WEBHOOK_SECRET" not in proxy_names
        assert "DRYDOCK_GITHUB_PRIVATE_KEY" in proxy_names


class TestDashboardLogin:
    def test_the_development_login_is_pinned_off_everywhere(self, manifests: list[Manifest]) -> None:
        for deployment in of_kind(manifests, "Deployment"):
            for container in containers(deployment):
                values = [v.get("value") for v in container["env"] if v["name"] == "DRYDOCK_DASHBOARD_DEV_LOGIN"]
                assert values == ["false"], deployment["metadata"]["name"]

    @pytest.mark.parametrize("where", ["env", "services.dashboard.env"])
    def test_turning_it_on_is_refused(self, helm: Path, where: str) -> None:
        result = run_helm(helm, "template", RELEASE, str(CHART), "--set", f"{where}.DRYDOCK_DASHBOARD_DEV_LOGIN=true")
        assert result.returncode != 0
        assert "never turns on the dashboard's development login" in result.stderr


class TestKeda:
    def test_workers_scale_on_the_lag_of_their_run_consumer(self, everything_manifests: list[Manifest]) -> None:
        deployments = {d["metadata"]["name"] for d in of_kind(everything_manifests, "Deployment")}
        objects = {component(s): s for s in of_kind(everything_manifests, "ScaledObject")}
        assert set(objects) == {"coder-worker", "reviewer-worker", "analyzer-worker"}
        for name, scaled in objects.items():
            assert scaled["apiVersion"] == "keda.sh/v1alpha1"
            assert scaled["spec"]["scaleTargetRef"]["name"] in deployments
            (trigger,) = scaled["spec"]["triggers"]
            assert trigger["type"] == "nats-jetstream"
            role = Role(name.removesuffix("-worker"))
            assert (trigger["metadata"]["stream"], trigger["metadata"]["consumer"]) == (RUNS_STREAM, run_consumer(role))
            assert all(isinstance(value, str) for value in trigger["metadata"].values())
            assert scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]

    def test_keda_on_a_web_service_is_refused(self, helm: Path) -> None:
        result = run_helm(
            helm,
            "template",
            RELEASE,
            str(CHART),
            "--set",
            "keda.enabled=true",
            "--set",
            "services.ingress.keda.enabled=true",
        )
        assert result.returncode != 0
        assert "only workers scale on JetStream lag" in result.stderr


def served_metrics() -> set[str]:
    """The names of the samples the services can serve on ``/metrics``, from the exposition's
    ``# TYPE`` lines (a labelled metric with no children yet has no samples to show)."""
    for module in METRIC_MODULES:
        importlib.import_module(module)
    served: set[str] = set()
    for line in generate_latest(REGISTRY).decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            # The exposition names a counter with its _total already.
            served.update(name + suffix for suffix in ("_bucket", "_count", "_sum") if kind == "histogram")
            served.add(name)
    return served


def selected_metrics(node: object) -> set[str]:
    """The metric names the PromQL expression ``node`` (parsed) selects."""
    if isinstance(node, promql_parser.VectorSelector):
        return {node.name or ""}
    found: set[str] = set()
    for part in ("lhs", "rhs", "expr", "vector_selector"):
        if hasattr(node, part):
            found |= selected_metrics(getattr(node, part))
    for argument in getattr(node, "args", None) or ():
        found |= selected_metrics(argument)
    return found


class TestAlerts:
    def test_only_when_asked_for(self, default_manifests: list[Manifest]) -> None:
        assert of_kind(default_manifests, "PrometheusRule") == []

    def test_every_rule_parses_and_reads_only_metrics_the_services_serve(
        self, everything_manifests: list[Manifest]
    ) -> None:
        [rule] = of_kind(everything_manifests, "PrometheusRule")
        assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        rules = [entry for group in rule["spec"]["groups"] for entry in group["rules"]]
        assert len(rules) >= 6
        served = served_metrics()
        for entry in rules:
            selected = selected_metrics(promql_parser.parse(entry["expr"]))
            assert selected, entry["alert"]
            assert selected <= served, (entry["alert"], selected - served)
            assert entry["labels"]["severity"] in {"warning", "critical"}
            assert entry["annotations"]["summary"]

    def test_the_thresholds_come_from_the_values(self, render: Render, tmp_path: Path) -> None:
        values = tmp_path / "alerts.yaml"
        values.write_text("alerts: {enabled: true, failedRunsRatio: 0.5, sandboxFailures: 7}\n")
        rendered = render(values)
        [rule] = of_kind(rendered, "PrometheusRule")
        expressions = {entry["alert"]: entry["expr"].strip() for entry in rule["spec"]["groups"][0]["rules"]}
        assert expressions["DrydockRunsFailing"].endswith("> 0.5")
        assert expressions["DrydockSandboxesFailing"].endswith("> 7")
        summaries = {entry["alert"]: entry["annotations"]["summary"] for entry in rule["spec"]["groups"][0]["rules"]}
        assert summaries["DrydockRunsFailing"].startswith("More than 50% of ")
