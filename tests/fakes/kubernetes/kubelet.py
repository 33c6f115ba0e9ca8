"""The fake kubelet: runs a pod's init containers and its container as local processes,
reports their state in the pod's status, and stops them when the pod is deleted."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import os
import secrets
import shutil
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.fakes.kubernetes.state import FakeCluster, Object, now

_SECRET_WAIT = 30.0
_ADDRESSES = 254 * 256 * 254
"""127.1.0.1 to 127.254.255.254, in steps that skip each ``.0`` and ``.255``."""
_POD_NUMBERS = itertools.count(secrets.randbelow(_ADDRESSES))
"""Process-wide, so that pods of different fakes never share an address; from a random start,
because every test process has a count of its own and their daemons share the host's ports."""


def _container_status(container: Mapping[str, Any], state: Object, *, ready: bool = False) -> Object:
    """A ContainerStatus with every field the API marks required."""
    return {
        "name": container["name"],
        "image": container["image"],
        "imageID": "",
        "ready": ready,
        "restartCount": 0,
        "state": state,
    }


class FakeKubelet:
    def __init__(self, cluster: FakeCluster, root: Path) -> None:
        self.cluster = cluster
        self.root = root
        self._processes: dict[tuple[str, str], asyncio.subprocess.Process] = {}
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}

    def admit(self, pod: Object) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        self._tasks[key] = asyncio.create_task(self._run(pod))

    def _ip(self) -> str:
        number = next(_POD_NUMBERS) % _ADDRESSES
        return f"127.{number // (256 * 254) + 1}.{number // 254 % 256}.{number % 254 + 1}"

    async def _update(self, pod: Object, status: Mapping[str, Any]) -> None:
        pod["status"] = dict(pod.get("status") or {}) | dict(status)
        await self.cluster.record("Pod", "MODIFIED", pod)

    async def _run(self, pod: Object) -> None:
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        spec = pod["spec"]
        if self.cluster.unschedulable:
            await self._update(
                pod,
                {
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "Unschedulable",
                            "message": "0/3 nodes are available: 3 Insufficient cpu.",
                        }
                    ]
                },
            )
            return
        container = spec["containers"][0]
        if container["image"] in self.cluster.failing_images:
            await self._update(
                pod,
                {
                    "containerStatuses": [
                        _container_status(
                            container,
                            {
                                "waiting": {
                                    "reason": "ErrImagePull",
                                    "message": f'failed to pull image "{container["image"]}": not found',
                                }
                            },
                        )
                    ]
                },
            )
            return
        directory = self.root / namespace / name
        volumes = await self._volumes(pod, directory)
        if volumes is None:
            return
        ip = self._ip()
        for init in spec.get("initContainers", []):
            process = await self._spawn(init, volumes, ip, directory / f"{init['name']}.log", pod)
            code = await process.wait()
            if code != 0:
                terminated = {"exitCode": code, "reason": "Error", "finishedAt": now()}
                await self._update(
                    pod,
                    {
                        "phase": "Failed",
                        "initContainerStatuses": [_container_status(init, {"terminated": terminated})],
                    },
                )
                return
        if pod["metadata"].get("deletionTimestamp"):
            return
        process = await self._spawn(container, volumes, ip, directory / f"{container['name']}.log", pod)
        self._processes[(namespace, name)] = process
        await self._update(
            pod,
            {
                "phase": "Running",
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "containerStatuses": [_container_status(container, {"running": {"startedAt": now()}}, ready=True)],
            },
        )
        code = await process.wait()
        if not pod["metadata"].get("deletionTimestamp"):
            terminated = {"exitCode": code, "reason": "Completed" if code == 0 else "Error", "finishedAt": now()}
            await self._update(
                pod,
                {
                    "phase": "Succeeded" if code == 0 else "Failed",
                    "containerStatuses": [_container_status(container, {"terminated": terminated})],
                },
            )

    async def _volumes(self, pod: Object, directory: Path) -> dict[str, Path] | None:
        namespace = pod["metadata"]["namespace"]
        paths = {}
        for volume in pod["spec"].get("volumes", []):
            path = directory / "volumes" / volume["name"]
            path.mkdir(parents=True, mode=0o700)
            paths[volume["name"]] = path
            if "secret" in volume:
                secret = await self._secret(namespace, volume["secret"]["secretName"])
                if secret is None:
                    return None
                mode = volume["secret"].get("defaultMode", 0o644)
                items = volume["secret"].get("items") or [{"key": k, "path": k} for k in secret["data"]]
                for item in items:
                    target = path / item["path"]
                    target.write_bytes(base64.b64decode(secret["data"][item["key"]]))
                    target.chmod(mode)
        return paths

    async def _secret(self, namespace: str, name: str) -> Object | None:
        """The kubelet retries a missing Secret volume until the Secret exists."""
        deadline = asyncio.get_running_loop().time() + _SECRET_WAIT
        while asyncio.get_running_loop().time() < deadline:
            secret = self.cluster.secrets.get((namespace, name))
            if secret is not None:
                return secret
            await asyncio.sleep(0.02)
        return None

    async def _spawn(
        self, container: Mapping[str, Any], volumes: Mapping[str, Path], ip: str, log: Path, pod: Object
    ) -> asyncio.subprocess.Process:
        mounts = sorted(
            ((m["mountPath"], volumes[m["name"]]) for m in container.get("volumeMounts", [])),
            key=lambda mount: -len(mount[0]),
        )

        def host_path(argument: str) -> str:
            for mount_path, host in mounts:
                if argument == mount_path or argument.startswith(mount_path + "/"):
                    return str(host) + argument[len(mount_path) :]
            return ip if argument == "0.0.0.0" else argument

        argv = [host_path(argument) for argument in container["command"] + container.get("args", [])]
        if argv[0] == "python3":
            argv[0] = sys.executable
        env = {item["name"]: host_path(item["value"]) for item in container.get("env", [])}
        env.setdefault("PATH", os.environ["PATH"])
        cwd = host_path(container.get("workingDir", str(log.parent)))
        with log.open("ab") as output:
            return await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                cwd=cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )

    async def terminate(self, pod: Object, grace: float) -> None:
        """Stop the pod's containers (SIGTERM, then SIGKILL after ``grace``) and remove the pod."""
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        process = self._processes.pop(key, None)
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), max(grace, 0.1))
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        shutil.rmtree(self.root / key[0] / key[1], ignore_errors=True)

    async def aclose(self) -> None:
        for namespace, name in list(self._tasks):
            pod = self.cluster.pods.get((namespace, name))
            if pod is not None:
                await self.terminate(pod, 0.5)
        for task in self._tasks.values():
            task.cancel()
