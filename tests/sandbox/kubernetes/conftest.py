"""Fixtures for the Kubernetes provider's tests: a fake API server whose kubelet runs real
daemons (see :mod:`tests.fakes.kubernetes`), and providers configured against it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from drydock.config import KubernetesSandboxSettings, SandboxSettings
from drydock.sandbox.providers.kubernetes import KubernetesProvider
from drydock.sandbox.records import SandboxStore
from tests.fakes.kubernetes import FakeKubernetes

NAMESPACE = "sandboxes-test"


@pytest.fixture
async def fake_kubernetes(tmp_path: Path) -> AsyncIterator[FakeKubernetes]:
    async with FakeKubernetes(tmp_path) as fake:
        yield fake


def kubernetes_settings(kubeconfig: Path, /, **kubernetes: Any) -> SandboxSettings:
    return SandboxSettings(
        provider="kubernetes",
        ready_timeout=timedelta(seconds=20),
        health_timeout=timedelta(seconds=2),
        kubernetes=KubernetesSandboxSettings.model_validate(
            {
                "namespace": NAMESPACE,
                "kubeconfig": str(kubeconfig),
                "start_timeout": timedelta(seconds=20),
                "termination_grace": 1,
                "delete_timeout": timedelta(seconds=10),
            }
            | kubernetes
        ),
    )


ProviderFactory = Callable[..., KubernetesProvider]


@pytest.fixture
async def make_provider(fake_kubernetes: FakeKubernetes, records: SandboxStore) -> AsyncIterator[ProviderFactory]:
    """Providers over the fake cluster (keyword arguments go to the kubernetes section); every
    sandbox they made is deleted afterwards."""
    made: list[KubernetesProvider] = []

    def make(**kubernetes: Any) -> KubernetesProvider:
        provider = KubernetesProvider(kubernetes_settings(fake_kubernetes.kubeconfig, **kubernetes), records)
        made.append(provider)
        return provider

    yield make
    for provider in made:
        if provider.pool is not None:
            await provider.pool.aclose()
    cleaner = KubernetesProvider(kubernetes_settings(fake_kubernetes.kubeconfig), records)
    for handle in await cleaner.list():
        await cleaner.delete(handle.id)
    for sandbox_id in await cleaner.pool_store.members():
        await cleaner.delete(sandbox_id)
    for provider in [*made, cleaner]:
        await provider.aclose()


@pytest.fixture
def provider(make_provider: ProviderFactory) -> KubernetesProvider:
    return make_provider()
