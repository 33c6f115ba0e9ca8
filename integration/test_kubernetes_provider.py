"""The provider-agnostic sandbox contract against the Kubernetes provider on a real cluster.

Where the cluster comes from, in order:

1. ``KUBECONFIG``: an existing cluster. Sandbox pods use ``DRYDOCK_TEST_SANDBOX_IMAGE``
   (default ``drydock-sandbox:dev``, which the Tiltfile builds and loads) in namespace
   ``DRYDOCK_TEST_SANDBOX_NAMESPACE`` (default ``drydock-sandbox-test``, created if missing).
2. A Docker daemon: a k3s cluster in a container (testcontainers), the sandbox image built from
   ``Dockerfile.sandbox`` and imported into it, and a route to its pod network (needs root).
3. Neither: every test here is skipped, saying so.

The test process talks to each sandbox's daemon at its pod IP, as a worker does, so pod IPs
must be routable from where the tests run (inside the cluster, or a local cluster with a route).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import tarfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from redis.asyncio import Redis

from drydock.config import KubernetesSandboxSettings, SandboxSettings
from drydock.embedded import embedded_infrastructure
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.providers.kubernetes import KubernetesProvider
from drydock.sandbox.providers.kubernetes.connection import api_client
from drydock.sandbox.records import SandboxStore
from tests.sandbox.provider_contract import ProviderContract

ROOT = Path(__file__).resolve().parent.parent
K3S_IMAGE = "rancher/k3s:v1.35.1-k3s1"
K3S_POD_NETWORK = "10.42.0.0/16"
IMAGE = "drydock-sandbox:dev"


@dataclass(frozen=True)
class Cluster:
    kubeconfig: Path
    image: str
    namespace: str


def _docker() -> Any | None:
    try:
        import docker  # type: ignore[import-untyped]

        daemon = docker.from_env()
        daemon.ping()
    except Exception:
        return None
    return daemon


def _import_image(daemon: Any, k3s: Any) -> None:
    daemon.images.build(path=str(ROOT), dockerfile="Dockerfile.sandbox", tag=IMAGE, rm=True)
    archive = b"".join(daemon.images.get(IMAGE).save(named=True))
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w") as tar:
        info = tarfile.TarInfo("image.tar")
        info.size = len(archive)
        tar.addfile(info, io.BytesIO(archive))
    container = k3s.get_wrapped_container()
    container.put_archive("/tmp", packed.getvalue())
    result = container.exec_run(["ctr", "--namespace", "k8s.io", "images", "import", "/tmp/image.tar"])
    assert result.exit_code == 0, result.output.decode(errors="replace")


def _route_to_pods(k3s: Any) -> str | None:
    """Route the k3s pod network through its container; the reason when that is impossible."""
    if os.geteuid() != 0:
        return "a route to the k3s pod network needs root"
    address = k3s.get_docker_client().bridge_ip(k3s.get_wrapped_container().id)
    added = subprocess.run(["ip", "route", "replace", K3S_POD_NETWORK, "via", address], capture_output=True, text=True)
    return None if added.returncode == 0 else f"cannot route {K3S_POD_NETWORK}: {added.stderr.strip()}"


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    kubeconfig = os.environ.get("KUBECONFIG")
    if kubeconfig:
        yield Cluster(
            Path(kubeconfig),
            os.environ.get("DRYDOCK_TEST_SANDBOX_IMAGE", IMAGE),
            os.environ.get("DRYDOCK_TEST_SANDBOX_NAMESPACE", "drydock-sandbox-test"),
        )
        return
    daemon = _docker()
    if daemon is None:
        pytest.skip("no Kubernetes cluster: KUBECONFIG is not set and no Docker daemon runs for a k3s container")
    from testcontainers.community.k3s import K3SContainer

    with K3SContainer(image=K3S_IMAGE) as k3s:
        reason = _route_to_pods(k3s)
        if reason is not None:
            pytest.skip(f"k3s runs, but its pods are unreachable from here: {reason}")
        _import_image(daemon, k3s)
        path = tmp_path_factory.mktemp("k3s") / "kubeconfig"
        path.write_text(k3s.config_yaml())
        yield Cluster(path, IMAGE, "drydock-sandbox-test")


@pytest.fixture(scope="session")
async def redis() -> AsyncIterator[Redis]:
    async with embedded_infrastructure(nats=False, redis=True) as urls:
        assert urls.redis is not None
        connection = Redis.from_url(urls.redis, decode_responses=True)
        yield connection
        await connection.aclose()


@pytest.fixture(scope="session")
def server_keys() -> ServerKeys:
    """MAC keys of the session's own, for the sandbox records (the unit tests' fixture is not
    this suite's)."""
    return ServerKeys([Fernet.generate_key().decode()])


def settings_for(cluster: Cluster, **kubernetes: Any) -> SandboxSettings:
    return SandboxSettings(
        provider="kubernetes",
        ready_timeout=timedelta(seconds=60),
        creation_timeout=timedelta(minutes=5),
        kubernetes=KubernetesSandboxSettings.model_validate(
            {
                "kubeconfig": str(cluster.kubeconfig),
                "namespace": cluster.namespace,
                "image": cluster.image,
                "start_timeout": timedelta(minutes=3),
                "termination_grace": 2,
            }
            | kubernetes
        ),
    )


@pytest.fixture(scope="session")
async def namespace(cluster: Cluster) -> str:
    api = await api_client(settings_for(cluster).kubernetes)
    try:
        body = client.V1Namespace(
            metadata=client.V1ObjectMeta(
                name=cluster.namespace, labels={"pod-security.kubernetes.io/enforce": "restricted"}
            )
        )
        with contextlib.suppress(ApiException):
            await client.CoreV1Api(api).create_namespace(body)
    finally:
        await api.close()
    return cluster.namespace


class TestKubernetesProviderContract(ProviderContract):
    @pytest.fixture(scope="class")
    @classmethod
    def class_records(cls, redis: Redis, server_keys: ServerKeys) -> SandboxStore:
        return SandboxStore(redis, Keys(prefix=f"k8s-{uuid.uuid4().hex[:8]}"), server_keys)

    @pytest.fixture(scope="class")
    @classmethod
    async def provider(
        cls, cluster: Cluster, namespace: str, class_records: SandboxStore
    ) -> AsyncIterator[KubernetesProvider]:
        provider = KubernetesProvider(settings_for(cluster), class_records)
        yield provider
        for handle in await provider.list():
            await provider.delete(handle.id)
        await provider.aclose()

    @pytest.fixture(scope="class")
    @classmethod
    async def other_provider(
        cls, cluster: Cluster, namespace: str, class_records: SandboxStore
    ) -> AsyncIterator[KubernetesProvider]:
        provider = KubernetesProvider(settings_for(cluster), class_records)
        yield provider
        await provider.aclose()


class TestWarmPoolOnACluster:
    async def test_a_claimed_pool_pod_serves_its_thread(
        self, cluster: Cluster, namespace: str, redis: Redis, server_keys: ServerKeys
    ) -> None:
        records = SandboxStore(redis, Keys(prefix=f"k8s-pool-{uuid.uuid4().hex[:8]}"), server_keys)
        provider = KubernetesProvider(
            settings_for(cluster, warm_pool_size=1, warm_pool_refill_interval=timedelta(hours=1)), records
        )
        assert provider.pool is not None
        try:
            assert await provider.pool.refill() == 1
            handle = await provider.create(str(uuid.uuid4()), labels={"role": "coder"})
            assert handle.labels["origin"] == "warm-pool"
            sandbox = SandboxBackend(handle)
            assert (await sandbox.run("id -u")).output.strip() == "1000"
            await sandbox.aclose()
        finally:
            await provider.pool.aclose()
            for handle in await provider.list():
                await provider.delete(handle.id)
            for sandbox_id in await provider.pool_store.members():
                await provider.delete(sandbox_id)
            await provider.aclose()
