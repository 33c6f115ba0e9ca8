"""The ``kubernetes`` provider: one pod per sandbox; see :mod:`drydock.sandbox.providers.kubernetes`."""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from drydock.config import SandboxSettings
from drydock.errors import describe
from drydock.sandbox.errors import SandboxCreationFailed, SandboxError, SandboxNotFound
from drydock.sandbox.handle import Isolation, SandboxHandle
from drydock.sandbox.providers.kubernetes import daemon_health, manifests, naming
from drydock.sandbox.providers.kubernetes.connection import api_client, api_error
from drydock.sandbox.providers.kubernetes.orphans import orphan_pods
from drydock.sandbox.providers.kubernetes.pod_status import Phase, pod_state
from drydock.sandbox.providers.kubernetes.pod_watch import wait_gone, wait_running
from drydock.sandbox.providers.kubernetes.warm_pool import WarmPool
from drydock.sandbox.providers.kubernetes.warm_pool_store import WarmPoolStore
from drydock.sandbox.records import SandboxStore

log = structlog.get_logger(__name__)

NAMESPACE_LABEL = "namespace"
ORIGIN_LABEL = "origin"
_RESERVED_LABELS = frozenset({NAMESPACE_LABEL, ORIGIN_LABEL})
_POOL_CLAIM_ATTEMPTS = 3


def daemon_url(ip: str, port: int) -> str:
    return f"http://[{ip}]:{port}" if ":" in ip else f"http://{ip}:{port}"


class KubernetesProvider:
    """Sandboxes as pods in ``settings.kubernetes.namespace``.

    ``api`` is a ready :class:`kubernetes_asyncio.client.ApiClient`; without it, one is made
    from the settings on first use (see :mod:`.connection`) and closed by :meth:`aclose`.
    With ``warm_pool_size`` > 0 a :class:`~.warm_pool.WarmPool` refills in the background from
    the first :meth:`create` or :meth:`start` on.
    """

    name = "kubernetes"
    reaches_credential_proxy = True

    def __init__(self, settings: SandboxSettings, records: SandboxStore, *, api: Any = None) -> None:
        self._settings = settings
        self._k8s = settings.kubernetes
        self._records = records
        self._api = api
        self._owns_api = api is None
        self._api_lock = asyncio.Lock()
        self.pool_store = WarmPoolStore(records.redis, records.keys, self._k8s.namespace)
        self.pool: WarmPool | None = None
        if self._k8s.warm_pool_size > 0:
            self.pool = WarmPool(
                self.pool_store,
                _PoolPods(self),
                size=self._k8s.warm_pool_size,
                refill_interval=self._k8s.warm_pool_refill_interval.total_seconds(),
                start_bound=self._start_bound(),
                claim_timeout=self._k8s.warm_pool_claim_timeout.total_seconds(),
            )

    @property
    def settings(self) -> SandboxSettings:
        return self._settings

    def _start_bound(self) -> float:
        return (self._k8s.start_timeout + self._settings.ready_timeout).total_seconds() + 30.0

    async def _core(self) -> Any:
        async with self._api_lock:
            if self._api is None:
                self._api = await api_client(self._k8s)
        return client.CoreV1Api(self._api)

    async def start(self) -> None:
        """Start the warm pool's refill now rather than at the first :meth:`create`."""
        if self.pool is not None:
            await self._core()
            self.pool.start()

    async def create(self, thread_id: str, *, labels: Mapping[str, str] | None = None) -> SandboxHandle:
        reserved = _RESERVED_LABELS & set(labels or {})
        if reserved:
            raise ValueError(f"labels {sorted(reserved)} are set by the kubernetes provider")
        if self.pool is not None:
            await self.start()
            claimed = await self._claim(thread_id, dict(labels or {}))
            if claimed is not None:
                return claimed
        handle = await self._launch(
            naming.new_sandbox_id(), thread_id=thread_id, labels=dict(labels or {}), origin=naming.ORIGIN_CREATED
        )
        await self._records.put(handle)
        log.info("sandbox created", sandbox_id=handle.id, thread_id=thread_id, namespace=self._k8s.namespace)
        return handle

    async def _claim(self, thread_id: str, labels: dict[str, str]) -> SandboxHandle | None:
        assert self.pool is not None
        for _ in range(_POOL_CLAIM_ATTEMPTS):
            pooled = await self.pool.claim()
            if pooled is None:
                return None
            if not await daemon_health.answers(pooled, within=self._settings.health_timeout.total_seconds()):
                log.warning("a warm-pool sandbox does not answer; deleting it", sandbox_id=pooled.id)
                await self.pool.discard(pooled.id)
                continue
            # Created "now" for the thread: the reaper's orphan grace protects the lifecycle's
            # compare-and-set that follows, however long the pod waited in the pool.
            handle = dataclasses.replace(
                pooled, thread_id=thread_id, labels=labels | dict(pooled.labels), created_at=datetime.now(UTC)
            )
            await self._records.put(handle)
            await self.pool.complete(handle.id)
            await self._label_claimed(handle, labels)
            log.info("sandbox claimed from the warm pool", sandbox_id=handle.id, thread_id=thread_id)
            return handle
        return None

    async def _label_claimed(self, handle: SandboxHandle, labels: Mapping[str, str]) -> None:
        current = {
            naming.SANDBOX_LABEL: handle.id,
            naming.ORIGIN_LABEL: naming.ORIGIN_WARM_POOL,
            naming.APP_LABEL: naming.APP,
            naming.MANAGED_BY_LABEL: naming.MANAGED_BY,
        }
        patch = manifests.claim_patch(thread_id=handle.thread_id, labels=labels, current=current)
        core = await self._core()
        try:
            await core.patch_namespaced_pod(
                handle.id, self._k8s.namespace, patch, _content_type="application/merge-patch+json"
            )
        except ApiException as error:
            log.warning("claimed sandbox could not be labelled", sandbox_id=handle.id, error=api_error(error))

    async def _launch(
        self, sandbox_id: str, *, thread_id: str | None, labels: dict[str, str], origin: str
    ) -> SandboxHandle:
        """Create the pod and its token Secret, wait for the daemon; delete everything on failure."""
        core = await self._core()
        namespace = self._k8s.namespace
        token = self._records.daemon_token(sandbox_id)
        pod = manifests.sandbox_pod(
            self._settings, sandbox_id=sandbox_id, thread_id=thread_id, labels=labels, origin=origin
        )
        try:
            created = await core.create_namespaced_pod(namespace, pod)
        except ApiException as error:
            raise SandboxCreationFailed(f"cannot create sandbox pod {sandbox_id}: {api_error(error)}") from error
        try:
            secret = manifests.token_secret(
                self._settings, sandbox_id=sandbox_id, token=token, pod_uid=created.metadata.uid
            )
            await core.create_namespaced_secret(namespace, secret)
            ip = await wait_running(core, namespace, sandbox_id, within=self._k8s.start_timeout.total_seconds())
            handle = SandboxHandle(
                id=sandbox_id,
                provider=self.name,
                thread_id=thread_id or "",
                base_url=daemon_url(ip, self._k8s.daemon_port),
                token=token,
                workspace=manifests.WORKSPACE,
                created_at=datetime.now(UTC),
                isolation=Isolation.POD,
                labels=labels | {NAMESPACE_LABEL: namespace, ORIGIN_LABEL: origin},
            )
            await daemon_health.wait_answering(handle, within=self._settings.ready_timeout.total_seconds())
        except ApiException as error:
            await self._remove_quietly(sandbox_id)
            raise SandboxCreationFailed(f"cannot create sandbox {sandbox_id}: {api_error(error)}") from error
        except BaseException:
            await self._remove_quietly(sandbox_id)
            raise
        return handle

    async def _remove_quietly(self, sandbox_id: str) -> None:
        try:
            await self._remove(sandbox_id)
        except (ApiException, SandboxError) as error:
            log.warning(
                "sandbox pod could not be deleted; the reaper will retry", sandbox_id=sandbox_id, error=describe(error)
            )

    async def _remove(self, sandbox_id: str) -> bool:
        """Delete the pod (and with it its Secret) and wait until it is gone; ``False`` if there
        was no such sandbox pod."""
        core = await self._core()
        namespace = self._k8s.namespace
        try:
            pod = await core.read_namespaced_pod(sandbox_id, namespace)
            if (pod.metadata.labels or {}).get(naming.SANDBOX_LABEL) != sandbox_id:
                return False
            deleted = await core.delete_namespaced_pod(
                sandbox_id, namespace, grace_period_seconds=self._k8s.termination_grace
            )
        except ApiException as error:
            if error.status == 404:
                return False
            raise SandboxError(f"cannot delete sandbox pod {sandbox_id}: {api_error(error)}") from error
        version = getattr(getattr(deleted, "metadata", None), "resource_version", None)
        timeout = self._k8s.delete_timeout.total_seconds()
        if not await wait_gone(core, namespace, sandbox_id, resource_version=version, within=timeout):
            log.warning("sandbox pod still terminating after the delete timeout", sandbox_id=sandbox_id)
        return True

    async def connect(self, sandbox_id: str) -> SandboxHandle:
        handle = await self._records.require(
            sandbox_id, provider=self.name, label=NAMESPACE_LABEL, value=self._k8s.namespace, place="in namespace"
        )
        core = await self._core()
        try:
            pod = await core.read_namespaced_pod(sandbox_id, self._k8s.namespace)
        except ApiException as error:
            if error.status == 404:
                raise SandboxNotFound(sandbox_id, "its pod is gone") from None
            raise SandboxError(f"cannot read sandbox pod {sandbox_id}: {api_error(error)}") from error
        state = pod_state(self._api.sanitize_for_serialization(pod))
        if state.phase is Phase.FAILED:
            raise SandboxNotFound(sandbox_id, state.reason)
        return handle

    async def delete(self, sandbox_id: str) -> bool:
        handle = await self._records.get(sandbox_id)
        if handle is not None and (
            handle.provider != self.name or handle.labels.get(NAMESPACE_LABEL) != self._k8s.namespace
        ):
            return False
        removed = await self._remove(sandbox_id)
        await self.pool_store.release(sandbox_id)
        if handle is not None:
            await self._records.remove(sandbox_id)
        if removed or handle is not None:
            log.info("sandbox deleted", sandbox_id=sandbox_id, thread_id=handle.thread_id if handle else None)
            return True
        return False

    async def list(self) -> builtins.list[SandboxHandle]:
        """Every recorded sandbox of this namespace, preceded by sandbox pods that have no
        record and are not in the warm pool (a creator died before recording them), so that the
        reaper deletes those too."""
        core = await self._core()
        if self.pool is not None:
            self.pool.start()
        try:
            pods = await core.list_namespaced_pod(self._k8s.namespace, label_selector=naming.SANDBOX_SELECTOR)
        except ApiException as error:
            raise SandboxError(f"cannot list sandbox pods: {api_error(error)}") from error
        # The pool before the records: a claim puts the record before it leaves the pool, so a
        # sandbox being claimed meanwhile is in one of the two reads.
        pooled = await self.pool_store.members()
        recorded = [
            handle
            for handle in await self._records.all(provider=self.name)
            if handle.labels.get(NAMESPACE_LABEL) == self._k8s.namespace
        ]
        unrecorded = [
            self._handle_from_pod(pod)
            for pod in orphan_pods(
                (self._api.sanitize_for_serialization(pod) for pod in pods.items),
                recorded={handle.id for handle in recorded},
                pooled=pooled,
            )
        ]
        unrecorded.sort(key=lambda handle: handle.created_at)
        return unrecorded + recorded

    def _handle_from_pod(self, pod: Mapping[str, Any]) -> SandboxHandle:
        """A handle for a pod without a record: enough for the reaper, not for use (no token)."""
        metadata = pod["metadata"]
        annotations = metadata.get("annotations") or {}
        created = metadata.get("creationTimestamp")
        ip = (pod.get("status") or {}).get("podIP")
        return SandboxHandle(
            id=metadata["name"],
            provider=self.name,
            thread_id=annotations.get(naming.THREAD_ANNOTATION, ""),
            base_url=daemon_url(ip, self._k8s.daemon_port) if ip else "",
            token="",
            workspace=manifests.WORKSPACE,
            created_at=_timestamp(created),
            isolation=Isolation.POD,
            labels={
                NAMESPACE_LABEL: self._k8s.namespace,
                ORIGIN_LABEL: (metadata.get("labels") or {}).get(naming.ORIGIN_LABEL, ""),
            },
        )

    async def aclose(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()
        if self._api is not None and self._owns_api:
            await self._api.close()
            self._api = None


def _timestamp(value: object) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return datetime.now(UTC)


class _PoolPods:
    """The provider as the warm pool sees it."""

    def __init__(self, provider: KubernetesProvider) -> None:
        self._provider = provider

    async def start_idle(self, sandbox_id: str) -> SandboxHandle:
        return await self._provider._launch(sandbox_id, thread_id=None, labels={}, origin=naming.ORIGIN_WARM_POOL)

    async def remove(self, sandbox_id: str) -> None:
        await self._provider._remove_quietly(sandbox_id)

    async def recorded(self, sandbox_id: str) -> bool:
        return await self._provider._records.get(sandbox_id) is not None

    def seal(self, handle: SandboxHandle) -> dict[str, str]:
        return self._provider._records.seal(handle)

    def unseal(self, record: Mapping[str, str]) -> SandboxHandle | None:
        return self._provider._records.unseal(record)
