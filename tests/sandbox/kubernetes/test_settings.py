"""The kubernetes section of the sandbox settings, and the provider's entry in the factory map."""

from __future__ import annotations

import pytest

from drydock.config import ConfigError, Settings, load_settings
from drydock.sandbox.providers import PROVIDERS, create_provider
from drydock.sandbox.providers.kubernetes import KubernetesProvider
from drydock.sandbox.records import SandboxStore


class TestVariables:
    def test_each_field_has_its_own_variable_and_mappings_take_json(self, env: pytest.MonkeyPatch) -> None:
        env.setenv("DRYDOCK_SANDBOX_KUBERNETES_IMAGE", "registry.example/sandbox:7")
        env.setenv("DRYDOCK_SANDBOX_KUBERNETES_NODE_SELECTOR", '{"pool": "sandboxes"}')
        env.setenv("DRYDOCK_SANDBOX_KUBERNETES_IMAGE_PULL_SECRETS", '["registry"]')
        env.setenv("DRYDOCK_SANDBOX_KUBERNETES_WARM_POOL_SIZE", "3")
        env.setenv("DRYDOCK_SANDBOX_KUBERNETES_ACTIVE_DEADLINE", "PT6H")
        env.setenv("DRYDOCK_SANDBOX_LOCAL_ROOT", "/srv/sandboxes")
        kubernetes = load_settings().sandbox.kubernetes
        assert kubernetes.image == "registry.example/sandbox:7"
        assert kubernetes.node_selector == {"pool": "sandboxes"}
        assert kubernetes.image_pull_secrets == ["registry"]
        assert kubernetes.warm_pool_size == 3
        assert kubernetes.active_deadline.total_seconds() == 6 * 3600
        assert load_settings().sandbox.local_root == "/srv/sandboxes"

    def test_the_whole_section_as_json_and_single_variables_on_top(self, env: pytest.MonkeyPatch) -> None:
        env.setenv("DRYDOCK_SANDBOX_KUBERNETES", '{"namespace": "agents", "image": "a:1"}')
        env.setenv("DRYDOCK_SANDBOX_KUBERNETES_IMAGE", "b:2")
        kubernetes = load_settings().sandbox.kubernetes
        assert (kubernetes.namespace, kubernetes.image) == ("agents", "b:2")

    @pytest.mark.parametrize(
        ("variable", "value", "problem"),
        [
            ("DRYDOCK_SANDBOX_KUBERNETES_CPU_LIMIT", "lots", "should match pattern"),
            ("DRYDOCK_SANDBOX_KUBERNETES_NAMESPACE", "Not_A_Label", "should match pattern"),
            ("DRYDOCK_SANDBOX_KUBERNETES_IMAGE_PULL_POLICY", "Sometimes", "Always"),
            ("DRYDOCK_SANDBOX_KUBERNETES_WARM_POOL_SIZE", "-1", "greater than or equal to 0"),
            ("DRYDOCK_SANDBOX_KUBERNETES_NODE_SELECTOR", "{pool", "must be JSON"),
            ("DRYDOCK_SANDBOX_KUBERNETES_IMAGE_PULL_SECRETS", '["Bad Name"]', "not a Kubernetes object name"),
        ],
    )
    def test_bad_values_name_the_variable(
        self, env: pytest.MonkeyPatch, variable: str, value: str, problem: str
    ) -> None:
        env.setenv(variable, value)
        with pytest.raises(ConfigError) as raised:
            load_settings()
        assert variable in str(raised.value)
        assert problem in str(raised.value)

    def test_a_pod_start_longer_than_the_creation_timeout_is_refused(self, env: pytest.MonkeyPatch) -> None:
        env.setenv("DRYDOCK_SANDBOX_PROVIDER", "kubernetes")
        env.setenv("DRYDOCK_SANDBOX_KUBERNETES_START_TIMEOUT", "600")
        with pytest.raises(ConfigError, match="start_timeout \\+ ready_timeout must not exceed creation_timeout"):
            load_settings()
        env.setenv("DRYDOCK_SANDBOX_PROVIDER", "local")
        assert load_settings().sandbox.kubernetes.start_timeout.total_seconds() == 600


class TestFactoryMap:
    async def test_kubernetes_is_in_the_factory_map(self, settings: Settings, records: SandboxStore) -> None:
        assert "kubernetes" in PROVIDERS
        chosen = settings.model_copy(update={"sandbox": settings.sandbox.model_copy(update={"provider": "kubernetes"})})
        provider = create_provider(chosen, records)
        assert isinstance(provider, KubernetesProvider)
        assert provider.name == "kubernetes"
        assert provider.pool is None
        await provider.aclose()
