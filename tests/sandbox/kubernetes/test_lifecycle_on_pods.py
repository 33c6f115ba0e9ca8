"""The lifecycle manager (DESIGN.md section 4) with pod sandboxes: a thread gets one pod, keeps
it across calls and processes, and gets a new one when its pod disappears."""

from __future__ import annotations

import uuid

import pytest
from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.sandbox.credentials import NoProxy
from drydock.sandbox.lifecycle import SandboxManager
from drydock.sandbox.providers.kubernetes import KubernetesProvider
from drydock.sandbox.providers.kubernetes.connection import ClusterUnreachable
from drydock.sandbox.records import SandboxStore
from drydock.threads.metadata import ThreadMetadataStore
from tests.fakes.kubernetes import FakeKubernetes
from tests.sandbox.kubernetes.conftest import NAMESPACE, ProviderFactory


def manager_for(provider: KubernetesProvider, records: SandboxStore, redis: Redis, keys: Keys) -> SandboxManager:
    return SandboxManager(
        provider=provider,
        records=records,
        metadata=ThreadMetadataStore(redis, keys),
        credentials=NoProxy(),
        redis=redis,
        keys=keys,
        settings=provider.settings,
    )


class TestLifecycleOnPods:
    async def test_a_thread_keeps_its_pod_and_gets_a_new_one_when_it_vanishes(
        self,
        make_provider: ProviderFactory,
        fake_kubernetes: FakeKubernetes,
        records: SandboxStore,
        redis: Redis,
        keys: Keys,
    ) -> None:
        thread_id = str(uuid.uuid4())
        await ThreadMetadataStore(redis, keys).create(thread_id, kind=Role.CODER)
        first, second = (manager_for(make_provider(), records, redis, keys) for _ in range(2))
        sandbox = await first.ensure_sandbox(thread_id)
        assert (await sandbox.run("git config --global user.name")).output == "Drydock\n"
        reconnected = await second.ensure_sandbox(thread_id)
        assert reconnected.id == sandbox.id
        pod = fake_kubernetes.cluster.pods.pop((NAMESPACE, sandbox.id))
        await fake_kubernetes.kubelet.terminate(pod, 0.5)
        replaced = await first.ensure_sandbox(thread_id)
        assert replaced.id != sandbox.id
        assert [name for (_, name) in fake_kubernetes.cluster.pods] == [replaced.id]
        await first.aclose()
        await second.aclose()


async def test_without_a_cluster_configuration_creation_says_so(make_provider: ProviderFactory) -> None:
    provider = make_provider(kubeconfig="/nonexistent/kubeconfig")
    with pytest.raises(ClusterUnreachable, match="no Kubernetes configuration"):
        await provider.create(str(uuid.uuid4()))
