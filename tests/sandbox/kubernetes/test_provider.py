"""The Kubernetes provider against the fake API server, whose kubelet runs the real daemon with
the pod's own command lines (see :mod:`tests.fakes.kubernetes`). The provider-agnostic contract
runs against a real cluster in ``integration/test_kubernetes_provider.py``."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.errors import SandboxCreationFailed, SandboxNotFound, SandboxUnavailable
from drydock.sandbox.handle import Isolation
from drydock.sandbox.providers.kubernetes import KubernetesProvider, naming
from drydock.sandbox.records import SandboxStore
from tests.fakes.kubernetes import FakeKubernetes
from tests.sandbox.kubernetes.conftest import NAMESPACE, ProviderFactory
from tests.waiting import eventually


def pods(fake: FakeKubernetes) -> dict[str, dict[str, object]]:
    return {name: pod for (namespace, name), pod in fake.cluster.pods.items() if namespace == NAMESPACE}


class TestCreate:
    async def test_a_sandbox_is_a_pod_reachable_by_its_ip_from_any_worker(
        self, make_provider: ProviderFactory, fake_kubernetes: FakeKubernetes
    ) -> None:
        provider, other = make_provider(), make_provider()
        thread_id = str(uuid.uuid4())
        handle = await provider.create(thread_id, labels={"role": "coder", "owner": "ada@example.com"})
        assert (handle.provider, handle.isolation, handle.workspace) == ("kubernetes", Isolation.POD, "/workspace")
        pod_ip = pods(fake_kubernetes)[handle.id]["status"]["podIP"]  # type: ignore[index]
        assert handle.base_url == f"http://{pod_ip}:8484"
        assert dict(handle.labels) == {
            "role": "coder",
            "owner": "ada@example.com",
            "namespace": NAMESPACE,
            "origin": "create",
        }
        sandbox = SandboxBackend(handle)
        assert (await sandbox.run("echo ready")).output == "ready\n"
        await sandbox.aclose()
        assert await other.connect(handle.id) == handle
        labels = pods(fake_kubernetes)[handle.id]["metadata"]["labels"]  # type: ignore[index]
        assert labels[naming.THREAD_LABEL] == thread_id
        assert labels["drydock.dev/role"] == "coder"
        assert handle.id in {listed.id for listed in await other.list()}

    async def test_the_token_reaches_the_daemon_only_through_the_secret(
        self, provider: KubernetesProvider, fake_kubernetes: FakeKubernetes, tmp_path: Path
    ) -> None:
        handle = await provider.create(str(uuid.uuid4()))
        pod = pods(fake_kubernetes)[handle.id]
        assert handle.token not in json.dumps(pod)
        secret = fake_kubernetes.cluster.secrets[(NAMESPACE, handle.id)]
        assert base64.b64decode(secret["data"][naming.TOKEN_KEY]).decode() == handle.token
        assert secret["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]  # type: ignore[index]
        token_volume = tmp_path / "kubelet" / NAMESPACE / handle.id / "volumes" / "token"
        assert list(token_volume.iterdir()) == [], "the daemon deletes its copy of the token after reading it"
        sandbox = SandboxBackend(handle)
        environment = (await sandbox.run("env; cat /proc/$PPID/cmdline | tr '\\0' ' '")).output
        assert handle.token not in environment
        await sandbox.aclose()

    async def test_an_exhausted_quota_is_a_clear_error_and_leaves_nothing(
        self, provider: KubernetesProvider, fake_kubernetes: FakeKubernetes, records: SandboxStore
    ) -> None:
        fake_kubernetes.cluster.quota_exhausted = True
        with pytest.raises(SandboxCreationFailed, match=r"403 Forbidden: .*exceeded quota"):
            await provider.create(str(uuid.uuid4()))
        assert pods(fake_kubernetes) == {}
        assert await records.all() == []

    async def test_an_image_pull_error_fails_at_once_and_the_pod_is_deleted(
        self, make_provider: ProviderFactory, fake_kubernetes: FakeKubernetes, records: SandboxStore
    ) -> None:
        provider = make_provider(image="registry.example/missing:1", start_timeout=timedelta(seconds=60))
        fake_kubernetes.cluster.failing_images.add("registry.example/missing:1")
        with pytest.raises(SandboxCreationFailed, match="ErrImagePull: failed to pull image"):
            await asyncio.wait_for(provider.create(str(uuid.uuid4())), 30)
        assert pods(fake_kubernetes) == {}
        assert fake_kubernetes.cluster.secrets == {}
        assert await records.all() == []

    async def test_an_unschedulable_pod_times_out_with_the_schedulers_reason(
        self, make_provider: ProviderFactory, fake_kubernetes: FakeKubernetes
    ) -> None:
        provider = make_provider(start_timeout=timedelta(seconds=1))
        fake_kubernetes.cluster.unschedulable = True
        with pytest.raises(SandboxCreationFailed, match="not running within 1 s: not scheduled: 0/3 nodes"):
            await provider.create(str(uuid.uuid4()))
        assert pods(fake_kubernetes) == {}

    async def test_labels_the_provider_sets_are_refused(self, provider: KubernetesProvider) -> None:
        with pytest.raises(ValueError, match="namespace"):
            await provider.create("t", labels={"namespace": "elsewhere"})


class TestConnect:
    async def test_an_unknown_id_is_not_found(self, provider: KubernetesProvider) -> None:
        with pytest.raises(SandboxNotFound, match="no record"):
            await provider.connect("sbx-unknown")

    async def test_a_sandbox_whose_pod_vanished_is_not_found(
        self, provider: KubernetesProvider, fake_kubernetes: FakeKubernetes
    ) -> None:
        handle = await provider.create(str(uuid.uuid4()))
        pod = fake_kubernetes.cluster.pods.pop((NAMESPACE, handle.id))
        await fake_kubernetes.kubelet.terminate(pod, 0.5)
        with pytest.raises(SandboxNotFound, match="its pod is gone"):
            await provider.connect(handle.id)
        assert await provider.delete(handle.id) is True

    async def test_a_sandbox_of_another_namespace_is_not_found(self, make_provider: ProviderFactory) -> None:
        handle = await make_provider().create(str(uuid.uuid4()))
        elsewhere = make_provider(namespace="elsewhere")
        with pytest.raises(SandboxNotFound, match=f"runs in namespace {NAMESPACE}"):
            await elsewhere.connect(handle.id)
        assert await elsewhere.delete(handle.id) is False


class TestDelete:
    async def test_delete_stops_the_daemon_and_removes_pod_secret_and_record(
        self, provider: KubernetesProvider, fake_kubernetes: FakeKubernetes, records: SandboxStore
    ) -> None:
        handle = await provider.create(str(uuid.uuid4()))
        sandbox = SandboxBackend(handle, connect_timeout=1.0)
        assert await provider.delete(handle.id) is True
        with pytest.raises(SandboxUnavailable):
            await sandbox.health()
        await sandbox.aclose()
        assert pods(fake_kubernetes) == {}
        assert fake_kubernetes.cluster.secrets == {}
        assert await records.get(handle.id) is None
        assert await provider.delete(handle.id) is False

    async def test_a_pod_that_is_not_a_sandbox_is_never_deleted(
        self, provider: KubernetesProvider, fake_kubernetes: FakeKubernetes
    ) -> None:
        foreign = {"metadata": {"name": "sbx-foreign", "namespace": NAMESPACE, "labels": {"app": "other"}}}
        fake_kubernetes.cluster.pods[(NAMESPACE, "sbx-foreign")] = foreign
        assert await provider.delete("sbx-foreign") is False
        assert "sbx-foreign" in pods(fake_kubernetes)
        del fake_kubernetes.cluster.pods[(NAMESPACE, "sbx-foreign")]


class TestList:
    async def test_a_pod_without_a_record_is_listed_for_the_reaper(
        self, provider: KubernetesProvider, fake_kubernetes: FakeKubernetes, records: SandboxStore
    ) -> None:
        handle = await provider.create(str(uuid.uuid4()))
        await records.remove(handle.id)
        listed = {item.id: item for item in await provider.list()}
        assert listed[handle.id].thread_id == handle.thread_id
        assert listed[handle.id].token == ""
        assert await provider.delete(handle.id) is True
        assert pods(fake_kubernetes) == {}


class TestWarmPool:
    async def test_the_pool_fills_with_idle_pods_that_nobody_lists(
        self, make_provider: ProviderFactory, fake_kubernetes: FakeKubernetes
    ) -> None:
        provider = make_provider(warm_pool_size=2, warm_pool_refill_interval=timedelta(hours=1))
        assert provider.pool is not None
        assert await provider.pool.refill() == 2
        assert await provider.pool.refill() == 0
        assert len(pods(fake_kubernetes)) == 2
        assert await provider.list() == []
        assert all(
            pod["metadata"]["labels"][naming.ORIGIN_LABEL] == naming.ORIGIN_WARM_POOL  # type: ignore[index]
            for pod in pods(fake_kubernetes).values()
        )

    async def test_a_claimed_pod_serves_its_thread_carries_its_labels_and_is_replaced(
        self, make_provider: ProviderFactory, fake_kubernetes: FakeKubernetes
    ) -> None:
        provider = make_provider(warm_pool_size=1, warm_pool_refill_interval=timedelta(hours=1))
        assert provider.pool is not None
        await provider.pool.refill()
        (pooled,) = pods(fake_kubernetes)
        thread_id = str(uuid.uuid4())
        claimed_after = datetime.now(UTC)
        handle = await provider.create(thread_id, labels={"role": "reviewer"})
        assert (handle.id, handle.thread_id, handle.labels["origin"]) == (pooled, thread_id, "warm-pool")
        assert handle.created_at >= claimed_after, "the reaper's orphan grace must count from the claim"
        labels = pods(fake_kubernetes)[pooled]["metadata"]["labels"]  # type: ignore[index]
        assert (labels[naming.THREAD_LABEL], labels["drydock.dev/role"]) == (thread_id, "reviewer")
        sandbox = SandboxBackend(handle)
        assert (await sandbox.run("echo claimed")).output == "claimed\n"
        await sandbox.aclose()
        assert await make_provider().connect(handle.id) == handle
        store = provider.pool_store

        async def refilled() -> bool:
            return await store.idle_count() == 1

        await eventually(refilled)
        assert {item.id for item in await provider.list()} == {handle.id}

    async def test_concurrent_creations_never_share_a_pool_pod(
        self, make_provider: ProviderFactory, fake_kubernetes: FakeKubernetes
    ) -> None:
        provider = make_provider(warm_pool_size=2, warm_pool_refill_interval=timedelta(hours=1))
        assert provider.pool is not None
        await provider.pool.refill()
        others = [make_provider(warm_pool_size=2, warm_pool_refill_interval=timedelta(hours=1)) for _ in range(3)]
        handles = await asyncio.gather(*(p.create(str(uuid.uuid4())) for p in [provider, *others]))
        assert len({handle.id for handle in handles}) == 4
        assert sum(handle.labels["origin"] == "warm-pool" for handle in handles) == 2

    async def test_a_dead_pool_pod_is_discarded_at_claim(
        self, make_provider: ProviderFactory, fake_kubernetes: FakeKubernetes
    ) -> None:
        provider = make_provider(warm_pool_size=1, warm_pool_refill_interval=timedelta(hours=1))
        assert provider.pool is not None
        await provider.pool.refill()
        (pooled,) = pods(fake_kubernetes)
        await fake_kubernetes.kubelet.terminate(pods(fake_kubernetes)[pooled], 0.2)
        handle = await provider.create(str(uuid.uuid4()))
        assert handle.id != pooled
        assert handle.labels["origin"] == "create"
        assert pooled not in pods(fake_kubernetes)

    async def test_a_claim_whose_claimer_died_is_cleaned_up(
        self, make_provider: ProviderFactory, fake_kubernetes: FakeKubernetes
    ) -> None:
        provider = make_provider(
            warm_pool_size=1,
            warm_pool_refill_interval=timedelta(hours=1),
            warm_pool_claim_timeout=timedelta(seconds=0.2),
        )
        assert provider.pool is not None
        await provider.pool.refill()
        (pooled,) = pods(fake_kubernetes)
        assert await provider.pool.claim() is not None
        await asyncio.sleep(0.3)
        assert await provider.pool.refill() == 1
        assert pooled not in pods(fake_kubernetes)
        assert pooled not in await provider.pool_store.members()
        assert len(pods(fake_kubernetes)) == 1
