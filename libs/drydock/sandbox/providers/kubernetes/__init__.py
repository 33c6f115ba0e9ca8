"""The ``kubernetes`` sandbox provider: one pod per sandbox, in a namespace of its own.

The path of a creation: :mod:`.provider` claims a ready pod from the :mod:`.warm_pool` when
one is configured, or builds the Pod and its token Secret (:mod:`.manifests`, pure functions,
named by :mod:`.naming`), creates them, waits for the pod to run (:mod:`.pod_watch`, which
reads the status through :mod:`.pod_status`) and for the daemon to answer health
(:mod:`.daemon_health`), then records the handle in Redis. Workers reach the daemon at the
pod's IP on ``daemon_port`` with the per-sandbox token.

Failures are :class:`~drydock.sandbox.errors.SandboxCreationFailed` with the reason the cluster
gave (quota exceeded, image pull error, unschedulable, deadline), and nothing is left behind.
The API permissions the provider uses are listed in :mod:`.rbac`; the Helm chart's Role grants
exactly those.
"""

from drydock.sandbox.providers.kubernetes.provider import KubernetesProvider

__all__ = ["KubernetesProvider"]
