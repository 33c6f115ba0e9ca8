"""The sandbox Pod and its token Secret, as built by the pure manifest functions."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest

from drydock.config import KubernetesSandboxSettings, SandboxSettings
from drydock.sandbox.providers.kubernetes import manifests, naming

KUBERNETES_VERSION = "1.35.0"


def settings(**kubernetes: Any) -> SandboxSettings:
    chosen = {"namespace": "sbx", "image": "registry.example/sandbox:1.2"} | kubernetes
    return SandboxSettings(kubernetes=KubernetesSandboxSettings.model_validate(chosen))


def pod(sandbox_settings: SandboxSettings | None = None, **overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "sandbox_id": "sbx-0123",
        "thread_id": "5f0c6a4e-1d2b-4c3a-9e8f-0a1b2c3d4e5f",
        "labels": {"role": "coder", "owner": "ada@example.com"},
        "origin": naming.ORIGIN_CREATED,
    } | overrides
    return manifests.sandbox_pod(sandbox_settings or settings(), **arguments)


def containers(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    spec = manifest["spec"]
    return [*spec["initContainers"], *spec["containers"]]


class TestPodValidity:
    @pytest.mark.parametrize(
        "sandbox_settings",
        [
            settings(),
            settings(
                workspace_volume="pvc",
                workspace_storage_class="fast",
                runtime_class="gvisor",
                node_selector={"pool": "sandboxes"},
                image_pull_secrets=["registry"],
                service_account="drydock-sandbox",
            ),
        ],
        ids=["defaults", "every-option"],
    )
    def test_the_pod_and_secret_validate_against_the_kubernetes_schema(self, sandbox_settings: SandboxSettings) -> None:
        manifest = pod(sandbox_settings)
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
        secret = manifests.token_secret(sandbox_settings, sandbox_id="sbx-0123", token="t", pod_uid="uid-1")
        kubernetes_validate.validate(secret, KUBERNETES_VERSION, strict=True)


class TestPodSecurity:
    def test_the_pod_meets_the_restricted_pod_security_standard(self) -> None:
        spec = pod()["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in containers(pod()):
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert context["runAsNonRoot"] is True
            assert context["runAsUser"] == 1000
            assert context["readOnlyRootFilesystem"] is True
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}
        assert not any("hostPath" in volume for volume in spec["volumes"])
        assert not any(spec.get(flag) for flag in ("hostNetwork", "hostPID", "hostIPC"))

    def test_no_service_account_token_and_no_service_links(self) -> None:
        spec = pod()["spec"]
        assert spec["automountServiceAccountToken"] is False
        assert spec["enableServiceLinks"] is False
        assert "serviceAccountName" not in spec
        named = pod(settings(service_account="drydock-sandbox"))["spec"]
        assert (named["serviceAccountName"], named["automountServiceAccountToken"]) == ("drydock-sandbox", False)

    def test_the_token_is_only_in_the_secret(self) -> None:
        token = "tok-very-secret-value"
        manifest = pod()
        assert token not in json.dumps(manifest)
        secret = manifests.token_secret(settings(), sandbox_id="sbx-0123", token=token, pod_uid="uid-1")
        assert base64.b64decode(secret["data"][naming.TOKEN_KEY]).decode() == token
        assert secret["immutable"] is True

    def test_only_the_init_container_sees_the_secret_and_the_daemon_reads_a_deletable_copy(self) -> None:
        init, daemon = containers(pod())
        secret_mounts = [mount for mount in init["volumeMounts"] if mount["name"] == "secret"]
        assert secret_mounts == [{"name": "secret", "mountPath": manifests.SECRET_DIRECTORY, "readOnly": True}]
        assert all(mount["name"] != "secret" for mount in daemon["volumeMounts"])
        assert init["command"] == ["cp", f"{manifests.SECRET_DIRECTORY}/token", manifests.TOKEN_FILE]
        token_flag = daemon["command"].index("--token-file")
        assert daemon["command"][token_flag + 1] == manifests.TOKEN_FILE
        token_volume = next(v for v in pod()["spec"]["volumes"] if v["name"] == "token")
        assert token_volume["emptyDir"]["medium"] == "Memory"

    def test_the_secret_is_owned_by_the_pod_so_it_is_deleted_with_it(self) -> None:
        secret = manifests.token_secret(settings(), sandbox_id="sbx-0123", token="t", pod_uid="uid-1")
        assert secret["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Pod", "name": "sbx-0123", "uid": "uid-1"}
        ]
        assert secret["metadata"]["namespace"] == "sbx"


class TestPodShape:
    def test_resources_deadline_and_restart_policy_come_from_the_settings(self) -> None:
        manifest = pod(
            settings(cpu_limit="4", memory_limit="8Gi", active_deadline=timedelta(hours=6), termination_grace=3)
        )
        spec = manifest["spec"]
        daemon = spec["containers"][0]
        assert daemon["resources"]["limits"] == {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "20Gi"}
        assert daemon["resources"]["requests"] == {"cpu": "250m", "memory": "512Mi", "ephemeral-storage": "1Gi"}
        assert (spec["activeDeadlineSeconds"], spec["terminationGracePeriodSeconds"]) == (6 * 3600, 3)
        assert spec["restartPolicy"] == "Never"
        assert all("limits" in container["resources"] for container in containers(manifest))

    def test_the_daemon_serves_the_workspace_on_the_daemon_port_with_the_sandbox_limits(self) -> None:
        sandbox_settings = settings(daemon_port=9000).model_copy(
            update={"exec_timeout": timedelta(seconds=30), "output_cap": 4096}
        )
        daemon = pod(sandbox_settings)["spec"]["containers"][0]
        command = daemon["command"]
        assert command[:4] == ["python3", "-I", "-m", "drydock.sandbox.daemon"]
        flags = dict(zip(command[4::2], command[5::2], strict=True))
        assert flags["--workspace"] == manifests.WORKSPACE
        assert (flags["--host"], flags["--port"]) == ("0.0.0.0", "9000")
        assert (flags["--default-timeout"], flags["--output-cap"]) == ("30.0", "4096")
        assert daemon["ports"] == [{"name": "daemon", "containerPort": 9000, "protocol": "TCP"}]
        assert daemon["workingDir"] == manifests.WORKSPACE

    def test_the_environment_is_the_configured_one_plus_home_tmp_and_the_sandbox_id(self) -> None:
        daemon = pod(settings(environment={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}))["spec"]["containers"][0]
        assert {item["name"]: item["value"] for item in daemon["env"]} == {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": manifests.HOME,
            "TMPDIR": manifests.TMP,
            "DRYDOCK_SANDBOX_ID": "sbx-0123",
        }

    def test_the_workspace_is_an_empty_dir_or_an_ephemeral_claim(self) -> None:
        default = next(v for v in pod()["spec"]["volumes"] if v["name"] == "workspace")
        assert default == {"name": "workspace", "emptyDir": {"sizeLimit": "10Gi"}}
        claim = next(
            v
            for v in pod(settings(workspace_volume="pvc", workspace_size="50Gi", workspace_storage_class="ssd"))[
                "spec"
            ]["volumes"]
            if v["name"] == "workspace"
        )
        assert claim["ephemeral"]["volumeClaimTemplate"]["spec"] == {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "50Gi"}},
            "storageClassName": "ssd",
        }

    def test_optional_scheduling_fields_appear_only_when_configured(self) -> None:
        plain = pod()["spec"]
        assert not {"runtimeClassName", "nodeSelector", "imagePullSecrets"} & set(plain)
        chosen = pod(settings(runtime_class="gvisor", node_selector={"pool": "sbx"}, image_pull_secrets=["reg"]))
        assert chosen["spec"]["runtimeClassName"] == "gvisor"
        assert chosen["spec"]["nodeSelector"] == {"pool": "sbx"}
        assert chosen["spec"]["imagePullSecrets"] == [{"name": "reg"}]


class TestPodLabels:
    def test_thread_role_and_owner_are_labels_and_the_exact_values_annotations(self) -> None:
        metadata = pod()["metadata"]
        labels = metadata["labels"]
        assert labels[naming.APP_LABEL] == naming.APP
        assert labels[naming.SANDBOX_LABEL] == "sbx-0123"
        assert labels[naming.THREAD_LABEL] == "5f0c6a4e-1d2b-4c3a-9e8f-0a1b2c3d4e5f"
        assert labels["drydock.dev/role"] == "coder"
        assert labels["drydock.dev/owner"].startswith("ada-example.com-")
        assert metadata["annotations"][naming.THREAD_ANNOTATION] == "5f0c6a4e-1d2b-4c3a-9e8f-0a1b2c3d4e5f"
        assert json.loads(metadata["annotations"][naming.LABELS_ANNOTATION]) == {
            "role": "coder",
            "owner": "ada@example.com",
        }

    def test_a_warm_pool_pod_has_no_thread_until_claimed(self) -> None:
        metadata = pod(thread_id=None, labels={}, origin=naming.ORIGIN_WARM_POOL)["metadata"]
        assert naming.THREAD_LABEL not in metadata["labels"]
        assert metadata["labels"][naming.ORIGIN_LABEL] == naming.ORIGIN_WARM_POOL
        current = metadata["labels"]
        patch = manifests.claim_patch(thread_id="t-1", labels={"role": "reviewer"}, current=current)
        assert patch["metadata"]["labels"] == {naming.THREAD_LABEL: "t-1", "drydock.dev/role": "reviewer"}
        assert patch["metadata"]["annotations"][naming.THREAD_ANNOTATION] == "t-1"

    def test_caller_labels_cannot_replace_the_fixed_ones(self) -> None:
        labels = pod(labels={"sandbox": "sbx-other", "thread": "other"})["metadata"]["labels"]
        assert labels[naming.SANDBOX_LABEL] == "sbx-0123"
        assert labels[naming.THREAD_LABEL] == "5f0c6a4e-1d2b-4c3a-9e8f-0a1b2c3d4e5f"
