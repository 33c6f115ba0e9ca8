"""The objects the provider sends to the API server, built by pure functions.

A sandbox is a Pod named after its id plus a Secret of the same name holding the daemon's
token. The Secret is owned by the Pod, so the garbage collector deletes it with the pod. The
token reaches the daemon without ever being readable by the commands it runs: an init container
copies it from the Secret into a memory-backed ``emptyDir``; the daemon container mounts only
that directory, reads the file and deletes it (``--token-file``). The token is in no
environment variable, no argument and no log.

The pod runs as a non-root user with every capability dropped, no privilege escalation, the
``RuntimeDefault`` seccomp profile, a read-only root filesystem, no service-account token and
no service links; it satisfies the Pod Security "restricted" standard. Writable are only the
workspace (``emptyDir`` or a generic ephemeral PVC), the home directory and ``/tmp``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from drydock.config import SandboxSettings
from drydock.sandbox.providers.kubernetes import naming

WORKSPACE = "/workspace"
HOME = "/home/sandbox"
TMP = "/tmp"
TOKEN_DIRECTORY = "/run/drydock"
SECRET_DIRECTORY = "/var/run/drydock-secret"
TOKEN_FILE = f"{TOKEN_DIRECTORY}/{naming.TOKEN_KEY}"
SANDBOX_ID_VARIABLE = "DRYDOCK_SANDBOX_ID"

Manifest = dict[str, Any]


def pod_labels(
    sandbox_id: str, *, thread_id: str | None, labels: Mapping[str, str], origin: str
) -> tuple[dict[str, str], dict[str, str]]:
    """The pod's labels and annotations: fixed selectors, the thread, and the caller's labels."""
    pod = {
        naming.APP_LABEL: naming.APP,
        naming.MANAGED_BY_LABEL: naming.MANAGED_BY,
        naming.SANDBOX_LABEL: sandbox_id,
        naming.ORIGIN_LABEL: origin,
    }
    annotations = {naming.LABELS_ANNOTATION: json.dumps(dict(labels), sort_keys=True)}
    if thread_id is not None:
        pod[naming.THREAD_LABEL] = naming.label_value(thread_id)
        annotations[naming.THREAD_ANNOTATION] = thread_id
    for name, value in sorted(labels.items()):
        key = naming.caller_label_key(name)
        if key is not None and key not in pod:
            pod[key] = naming.label_value(value)
    return pod, annotations


def _daemon_command(settings: SandboxSettings) -> list[str]:
    return [
        "python3",
        "-I",
        "-m",
        "drydock.sandbox.daemon",
        "--workspace",
        WORKSPACE,
        "--root",
        TMP,
        "--token-file",
        TOKEN_FILE,
        "--host",
        "0.0.0.0",
        "--port",
        str(settings.kubernetes.daemon_port),
        "--default-timeout",
        str(settings.exec_timeout.total_seconds()),
        "--max-timeout",
        str(settings.max_exec_timeout.total_seconds()),
        "--output-cap",
        str(settings.output_cap),
        "--max-concurrent-execs",
        str(settings.max_concurrent_execs),
        "--max-queued-execs",
        str(settings.max_queued_execs),
    ]


def _container_security(settings: SandboxSettings) -> Manifest:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": settings.kubernetes.run_as_user,
        "runAsGroup": settings.kubernetes.run_as_group,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _workspace_volume(settings: SandboxSettings) -> Manifest:
    k8s = settings.kubernetes
    if k8s.workspace_volume == "emptyDir":
        return {"name": "workspace", "emptyDir": {"sizeLimit": k8s.workspace_size}}
    claim: Manifest = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": k8s.workspace_size}}}
    if k8s.workspace_storage_class is not None:
        claim["storageClassName"] = k8s.workspace_storage_class
    return {"name": "workspace", "ephemeral": {"volumeClaimTemplate": {"spec": claim}}}


def sandbox_pod(
    settings: SandboxSettings,
    *,
    sandbox_id: str,
    thread_id: str | None,
    labels: Mapping[str, str],
    origin: str,
) -> Manifest:
    """The sandbox's Pod. ``thread_id`` is ``None`` for a warm-pool pod, which gets its thread
    when it is claimed."""
    k8s = settings.kubernetes
    pod_labels_, annotations = pod_labels(sandbox_id, thread_id=thread_id, labels=labels, origin=origin)
    environment = dict(k8s.environment) | {"HOME": HOME, "TMPDIR": TMP, SANDBOX_ID_VARIABLE: sandbox_id}
    resources = {
        "requests": {
            "cpu": k8s.cpu_request,
            "memory": k8s.memory_request,
            "ephemeral-storage": k8s.ephemeral_storage_request,
        },
        "limits": {"cpu": k8s.cpu_limit, "memory": k8s.memory_limit, "ephemeral-storage": k8s.ephemeral_storage_limit},
    }
    token_mount = {"name": "token", "mountPath": TOKEN_DIRECTORY}
    spec: Manifest = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "activeDeadlineSeconds": int(k8s.active_deadline.total_seconds()),
        "terminationGracePeriodSeconds": k8s.termination_grace,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": k8s.run_as_user,
            "runAsGroup": k8s.run_as_group,
            "fsGroup": k8s.run_as_group,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "initContainers": [
            {
                "name": "token",
                "image": k8s.image,
                "imagePullPolicy": k8s.image_pull_policy,
                "command": ["cp", f"{SECRET_DIRECTORY}/{naming.TOKEN_KEY}", TOKEN_FILE],
                "resources": {
                    "requests": {"cpu": "10m", "memory": "16Mi", "ephemeral-storage": "1Mi"},
                    "limits": {"cpu": "100m", "memory": "32Mi", "ephemeral-storage": "16Mi"},
                },
                "securityContext": _container_security(settings),
                "volumeMounts": [{"name": "secret", "mountPath": SECRET_DIRECTORY, "readOnly": True}, token_mount],
            }
        ],
        "containers": [
            {
                "name": naming.CONTAINER,
                "image": k8s.image,
                "imagePullPolicy": k8s.image_pull_policy,
                "command": _daemon_command(settings),
                "workingDir": WORKSPACE,
                "env": [{"name": name, "value": value} for name, value in sorted(environment.items())],
                "ports": [{"name": "daemon", "containerPort": k8s.daemon_port, "protocol": "TCP"}],
                "resources": resources,
                "securityContext": _container_security(settings),
                "volumeMounts": [
                    {"name": "workspace", "mountPath": WORKSPACE},
                    {"name": "home", "mountPath": HOME},
                    {"name": "tmp", "mountPath": TMP},
                    token_mount,
                ],
            }
        ],
        "volumes": [
            _workspace_volume(settings),
            {"name": "home", "emptyDir": {}},
            {"name": "tmp", "emptyDir": {}},
            {"name": "token", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
            {
                "name": "secret",
                "secret": {
                    "secretName": sandbox_id,
                    "defaultMode": 0o440,
                    "items": [{"key": naming.TOKEN_KEY, "path": naming.TOKEN_KEY}],
                },
            },
        ],
    }
    if k8s.service_account is not None:
        spec["serviceAccountName"] = k8s.service_account
    if k8s.runtime_class is not None:
        spec["runtimeClassName"] = k8s.runtime_class
    if k8s.node_selector:
        spec["nodeSelector"] = dict(k8s.node_selector)
    if k8s.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in k8s.image_pull_secrets]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": sandbox_id,
            "namespace": k8s.namespace,
            "labels": pod_labels_,
            "annotations": annotations,
        },
        "spec": spec,
    }


def token_secret(settings: SandboxSettings, *, sandbox_id: str, token: str, pod_uid: str) -> Manifest:
    """The Secret holding the daemon's token, owned by (and deleted with) the pod ``pod_uid``."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "immutable": True,
        "metadata": {
            "name": sandbox_id,
            "namespace": settings.kubernetes.namespace,
            "labels": {
                naming.APP_LABEL: naming.APP,
                naming.MANAGED_BY_LABEL: naming.MANAGED_BY,
                naming.SANDBOX_LABEL: sandbox_id,
            },
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": sandbox_id, "uid": pod_uid}],
        },
        "data": {naming.TOKEN_KEY: base64.b64encode(token.encode()).decode()},
    }


def claim_patch(*, thread_id: str, labels: Mapping[str, str], current: Mapping[str, str]) -> Manifest:
    """A JSON merge patch giving a claimed warm-pool pod its thread's labels and annotations;
    ``current`` are the pod's labels now, and labels that already have their value are left out."""
    sandbox_id = current.get(naming.SANDBOX_LABEL, "")
    wanted, annotations = pod_labels(
        sandbox_id, thread_id=thread_id, labels=labels, origin=current.get(naming.ORIGIN_LABEL, naming.ORIGIN_WARM_POOL)
    )
    added = {key: value for key, value in wanted.items() if current.get(key) != value}
    return {"metadata": {"labels": added, "annotations": annotations}}
