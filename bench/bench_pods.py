"""Sandbox pods on a real cluster (``KUBECONFIG``): a cold create until the daemon answers its
health check, and a warm-pool claim until the first command has run in the claimed pod; and,
when a Drydock release runs in namespace ``drydock``, a worker pod's start until it is ready.

Run: ``KUBECONFIG=... pdm run bench pods`` (images: ``pdm run images``, see README "Kubernetes").
Without ``KUBECONFIG`` it prints that it skipped. Pods use ``DRYDOCK_TEST_SANDBOX_IMAGE``
(default ``drydock-sandbox:dev``) in namespace ``drydock-bench-sandboxes``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
import uuid
from datetime import UTC, datetime, timedelta

from cryptography.fernet import Fernet
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from bench.harness import Figures, report
from drydock.config import KubernetesSandboxSettings, SandboxSettings
from drydock.embedded import embedded_infrastructure
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.providers.kubernetes import KubernetesProvider
from drydock.sandbox.providers.kubernetes.connection import api_client
from drydock.sandbox.records import SandboxStore

COLD = 10
WARM_POOL = 3
"""Pods the warm pool holds per round: what a 2-core node fits beside a Drydock release."""
WARM_ROUNDS = 4
NAMESPACE = "drydock-bench-sandboxes"
RELEASE_NAMESPACE = "drydock"
WORKER = "drydock-coder-worker"
READY_WITHIN = timedelta(minutes=3)


def _settings(kubeconfig: str, **kubernetes: object) -> SandboxSettings:
    return SandboxSettings(
        provider="kubernetes",
        ready_timeout=timedelta(seconds=60),
        creation_timeout=timedelta(minutes=5),
        kubernetes=KubernetesSandboxSettings.model_validate(
            {
                "kubeconfig": kubeconfig,
                "namespace": NAMESPACE,
                "image": os.environ.get("DRYDOCK_TEST_SANDBOX_IMAGE", "drydock-sandbox:dev"),
                "image_pull_policy": "IfNotPresent",
                "start_timeout": READY_WITHIN,
                "termination_grace": 1,
                # Small requests, so that the pool fits on a 2-core node beside a Drydock release.
                "cpu_request": "50m",
                "memory_request": "64Mi",
            }
            | kubernetes
        ),
    )


async def _namespace(settings: SandboxSettings) -> None:
    api = await api_client(settings.kubernetes)
    try:
        body = client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE))
        with contextlib.suppress(ApiException):
            await client.CoreV1Api(api).create_namespace(body)
    finally:
        await api.close()


def _figures(name: str, latencies: list[float], seconds: float) -> Figures:
    return Figures(name, len(latencies), seconds, latencies)


async def cold_creates(provider: KubernetesProvider) -> Figures:
    latencies = []
    started = time.perf_counter()
    for _ in range(COLD):
        begin = time.perf_counter()
        handle = await provider.create(str(uuid.uuid4()), labels={"role": "coder"})
        latencies.append((time.perf_counter() - begin) * 1000)
        await provider.delete(handle.id)
    return _figures("sandbox pod cold create → daemon healthy", latencies, time.perf_counter() - started)


async def _until_idle(provider: KubernetesProvider, count: int) -> None:
    """Wait until the pool holds ``count`` idle pods (its own refill task may have started them)."""
    deadline = time.monotonic() + READY_WITHIN.total_seconds()
    for _ in itertools.count():
        if await provider.pool_store.idle_count() >= count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the warm pool did not hold {count} idle pods within {READY_WITHIN}")
        await asyncio.sleep(0.2)


async def warm_claims(provider: KubernetesProvider) -> Figures:
    """Rounds of: fill the pool (not timed), then claim every pod in it, timing each claim."""
    assert provider.pool is not None
    latencies: list[float] = []
    claiming = 0.0
    for _ in range(WARM_ROUNDS):
        await provider.pool.refill()
        await _until_idle(provider, WARM_POOL)
        begin_round = time.perf_counter()
        for _ in range(WARM_POOL):
            begin = time.perf_counter()
            handle = await provider.create(str(uuid.uuid4()), labels={"role": "coder"})
            sandbox = SandboxBackend(handle)
            result = await sandbox.run("true")
            latencies.append((time.perf_counter() - begin) * 1000)
            assert handle.labels.get("origin") == "warm-pool", handle.labels
            assert result.exit_code == 0, result.output
            await sandbox.aclose()
        claiming += time.perf_counter() - begin_round
        for handle in await provider.list():
            await provider.delete(handle.id)
    return _figures("warm-pool claim → first exec returned", latencies, claiming)


async def worker_start(kubeconfig: str) -> Figures | None:
    """Restart the release's coder worker and time its new pod from creation to Ready."""
    settings = _settings(kubeconfig)
    api = await api_client(settings.kubernetes)
    try:
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        try:
            await apps.read_namespaced_deployment(WORKER, RELEASE_NAMESPACE)
        except ApiException:
            print(f"worker pod start: skipped, no Deployment {WORKER} in namespace {RELEASE_NAMESPACE}")
            return None
        restarted = datetime.now(UTC)
        patch = {"spec": {"template": {"metadata": {"annotations": {"drydock/bench-restart": restarted.isoformat()}}}}}
        await apps.patch_namespaced_deployment(WORKER, RELEASE_NAMESPACE, patch)
        deadline = time.monotonic() + READY_WITHIN.total_seconds()
        while time.monotonic() < deadline:
            pods = await core.list_namespaced_pod(
                RELEASE_NAMESPACE, label_selector="app.kubernetes.io/component=coder-worker"
            )
            for pod in pods.items:
                created = pod.metadata.creation_timestamp
                ready = next((c for c in pod.status.conditions or [] if c.type == "Ready" and c.status == "True"), None)
                if created >= restarted.replace(microsecond=0) and ready is not None:
                    seconds = (ready.last_transition_time - created).total_seconds()
                    return _figures("worker pod created → Ready (1 s resolution)", [seconds * 1000], seconds)
            await asyncio.sleep(0.5)
        raise TimeoutError(f"no new {WORKER} pod became Ready within {READY_WITHIN}")
    finally:
        await api.close()


async def main() -> None:
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        print("pods: skipped, KUBECONFIG is not set (no cluster to start pods on)")
        return
    async with embedded_infrastructure(nats=False) as urls:
        assert urls.redis is not None
        from redis.asyncio import Redis

        redis = Redis.from_url(urls.redis, decode_responses=True)
        records = SandboxStore(redis, Keys(prefix="bench-pods"), ServerKeys([Fernet.generate_key().decode()]))
        await _namespace(_settings(kubeconfig))
        cold = KubernetesProvider(_settings(kubeconfig), records)
        warm = KubernetesProvider(
            _settings(kubeconfig, warm_pool_size=WARM_POOL, warm_pool_refill_interval=timedelta(hours=1)), records
        )
        try:
            report(await cold_creates(cold))
            report(await warm_claims(warm), target_p50_ms=200.0)
        finally:
            if warm.pool is not None:
                await warm.pool.aclose()
            for provider in (cold, warm):
                for handle in await provider.list():
                    await provider.delete(handle.id)
            for sandbox_id in await warm.pool_store.members():
                await warm.delete(sandbox_id)
            await cold.aclose()
            await warm.aclose()
            await redis.aclose()
    started = await worker_start(kubeconfig)
    if started is not None:
        report(started)
