"""The fake API server (aiohttp on a free loopback port) and a kubeconfig that points at it."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from tests.fakes.kubernetes.kubelet import FakeKubelet
from tests.fakes.kubernetes.state import ApiError, FakeCluster, Object, matches, now

TOKEN = "fake-kubernetes-token"


def _json(obj: Object, status: int = 200) -> web.Response:
    return web.json_response(obj, status=status)


@web.middleware
async def _errors(request: web.Request, handler: Any) -> web.StreamResponse:
    if request.headers.get("Authorization") != f"Bearer {TOKEN}":
        return _json(ApiError(401, "Unauthorized", "Unauthorized").status(), 401)
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except ApiError as error:
        return _json(error.status(), error.code)


class FakeKubernetes:
    """``async with FakeKubernetes(tmp_path) as fake: fake.kubeconfig`` (a file)."""

    def __init__(self, root: Path) -> None:
        self.cluster = FakeCluster()
        self.kubelet = FakeKubelet(self.cluster, root / "kubelet")
        self._root = root
        self._runner: web.AppRunner | None = None
        self.kubeconfig = root / "kubeconfig"
        self._streams: set[asyncio.Task[Any]] = set()

    def _app(self) -> web.Application:
        app = web.Application(middlewares=[_errors])
        base = "/api/v1/namespaces/{namespace}"
        app.router.add_post(base + "/pods", self.create_pod)
        app.router.add_get(base + "/pods", self.list_pods)
        app.router.add_get(base + "/pods/{name}", self.read_pod)
        app.router.add_patch(base + "/pods/{name}", self.patch_pod)
        app.router.add_delete(base + "/pods/{name}", self.delete_pod)
        app.router.add_post(base + "/secrets", self.create_secret)
        return app

    async def __aenter__(self) -> FakeKubernetes:
        self._runner = web.AppRunner(self._app(), access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                    "users": [{"name": "fake", "user": {"token": TOKEN}}],
                    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                    "current-context": "fake",
                }
            )
        )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.kubelet.aclose()
        if self._runner is not None:
            await self._runner.cleanup()

    def _seen(self, request: web.Request, verb: str) -> None:
        self.cluster.requests.append((verb, request.path))

    async def create_pod(self, request: web.Request) -> web.Response:
        self._seen(request, "create")
        namespace = request.match_info["namespace"]
        body = await request.json()
        name = body["metadata"]["name"]
        if self.cluster.quota_exhausted:
            raise ApiError(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: exceeded quota: sandboxes, requested: pods=1, used: pods=20, '
                "limited: pods=20",
            )
        if (namespace, name) in self.cluster.pods:
            raise ApiError(409, "AlreadyExists", f'pods "{name}" already exists')
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": self.cluster.new_metadata(body["metadata"], namespace),
            "spec": body["spec"],
            "status": {"phase": "Pending"},
        }
        self.cluster.pods[(namespace, name)] = pod
        await self.cluster.record("Pod", "ADDED", pod)
        self.kubelet.admit(pod)
        return _json(pod, 201)

    async def read_pod(self, request: web.Request) -> web.Response:
        self._seen(request, "get")
        return _json(self.cluster.pod(request.match_info["namespace"], request.match_info["name"]))

    async def patch_pod(self, request: web.Request) -> web.Response:
        self._seen(request, "patch")
        if request.content_type != "application/merge-patch+json":
            raise ApiError(415, "UnsupportedMediaType", f"the fake takes merge patches, not {request.content_type}")
        pod = self.cluster.pod(request.match_info["namespace"], request.match_info["name"])
        patch = await request.json()
        for part in ("labels", "annotations"):
            for key, value in (patch.get("metadata", {}).get(part) or {}).items():
                target = pod["metadata"].setdefault(part, {})
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value
        await self.cluster.record("Pod", "MODIFIED", pod)
        return _json(pod)

    async def delete_pod(self, request: web.Request) -> web.Response:
        self._seen(request, "delete")
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        pod = self.cluster.pod(namespace, name)
        grace = float(request.query.get("gracePeriodSeconds", "30"))
        if not pod["metadata"].get("deletionTimestamp"):
            pod["metadata"]["deletionTimestamp"] = now()
            pod["metadata"]["deletionGracePeriodSeconds"] = int(grace)
            await self.cluster.record("Pod", "MODIFIED", pod)
            task = asyncio.create_task(self._finish_deletion(pod, grace))
            self._streams.add(task)
            task.add_done_callback(self._streams.discard)
        return _json(pod)

    async def _finish_deletion(self, pod: Object, grace: float) -> None:
        await self.kubelet.terminate(pod, grace)
        namespace, name, uid = pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"]
        self.cluster.pods.pop((namespace, name), None)
        await self.cluster.record("Pod", "DELETED", pod)
        for key, secret in list(self.cluster.secrets.items()):
            if any(owner.get("uid") == uid for owner in secret["metadata"].get("ownerReferences", [])):
                del self.cluster.secrets[key]

    async def create_secret(self, request: web.Request) -> web.Response:
        self._seen(request, "create-secret")
        namespace = request.match_info["namespace"]
        body = await request.json()
        name = body["metadata"]["name"]
        if (namespace, name) in self.cluster.secrets:
            raise ApiError(409, "AlreadyExists", f'secrets "{name}" already exists')
        secret = copy.deepcopy(body) | {"metadata": self.cluster.new_metadata(body["metadata"], namespace)}
        self.cluster.secrets[(namespace, name)] = secret
        await self.cluster.record("Secret", "ADDED", secret)
        return _json(secret, 201)

    async def list_pods(self, request: web.Request) -> web.StreamResponse:
        namespace = request.match_info["namespace"]
        labels, fields = request.query.get("labelSelector"), request.query.get("fieldSelector")
        if request.query.get("watch") in ("true", "1", "True"):
            self._seen(request, "watch")
            return await self._watch(request, namespace, labels, fields)
        self._seen(request, "list")
        items = [pod for pod in self.cluster.pods_in(namespace) if matches(pod, labels, fields)]
        return _json(
            {
                "kind": "PodList",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self.cluster.version)},
                "items": items,
            }
        )

    async def _watch(
        self, request: web.Request, namespace: str, labels: str | None, fields: str | None
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(request.query.get("timeoutSeconds", "1800"))

        def relevant(obj: Object) -> bool:
            return obj["metadata"]["namespace"] == namespace and matches(obj, labels, fields)

        since = request.query.get("resourceVersion")
        if since:
            cursor = int(since)
        else:
            cursor = self.cluster.version
            for pod in self.cluster.pods_in(namespace):
                if matches(pod, labels, fields):
                    await response.write(json.dumps({"type": "ADDED", "object": pod}).encode() + b"\n")
        try:
            while (remaining := deadline - loop.time()) > 0:
                for event in [e for e in self.cluster.events if e.resource_version > cursor]:
                    cursor = event.resource_version
                    if event.kind == "Pod" and relevant(event.obj):
                        await response.write(json.dumps({"type": event.type, "object": event.obj}).encode() + b"\n")
                await self.cluster.wait_for_change(min(remaining, 0.5))
            await response.write_eof()
        except ConnectionResetError:
            return response
        return response
