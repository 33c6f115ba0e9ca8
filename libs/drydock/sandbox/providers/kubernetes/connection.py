"""The connection to the Kubernetes API: a kubeconfig file when one is configured, the pod's
service account when running in a cluster, the default kubeconfig otherwise."""

from __future__ import annotations

import json
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import ConfigException

from drydock.config import KubernetesSandboxSettings
from drydock.sandbox.errors import SandboxError


class ClusterUnreachable(SandboxError):
    """No usable cluster configuration (no kubeconfig, not in a pod)."""


async def api_client(settings: KubernetesSandboxSettings) -> Any:
    """An :class:`kubernetes_asyncio.client.ApiClient` for the configured cluster."""
    configuration = client.Configuration()
    try:
        if settings.kubeconfig is not None:
            await config.load_kube_config(
                config_file=settings.kubeconfig, context=settings.context, client_configuration=configuration
            )
        else:
            try:
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except ConfigException:
                await config.load_kube_config(context=settings.context, client_configuration=configuration)
    except (ConfigException, OSError) as error:
        raise ClusterUnreachable(f"no Kubernetes configuration: {error}") from error
    return client.ApiClient(configuration=configuration)


def api_error(error: ApiException) -> str:
    """The API server's own message (from its Status body), else the HTTP status and reason."""
    message = None
    if error.body:
        try:
            message = json.loads(error.body).get("message")
        except (ValueError, AttributeError):
            message = None
    return f"{error.status} {error.reason}: {message}" if message else f"{error.status} {error.reason}"
