"""Waiting on one pod through the API's watch: until it runs (its IP), or until it is gone."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kubernetes_asyncio import watch
from kubernetes_asyncio.client.exceptions import ApiException

from drydock.sandbox.errors import SandboxCreationFailed
from drydock.sandbox.providers.kubernetes.connection import api_error
from drydock.sandbox.providers.kubernetes.pod_status import Phase, PodState, pod_state


async def wait_running(core: Any, namespace: str, name: str, *, within: float) -> str:
    """The pod's IP once its daemon container runs; :class:`SandboxCreationFailed` with the
    reason when it fails to start (image pull, configuration), is deleted, or is still not
    running after ``within`` seconds."""
    deadline = time.monotonic() + within
    last = PodState(Phase.STARTING, "not yet seen")
    while (remaining := deadline - time.monotonic()) > 0:
        stream = watch.Watch()
        try:
            async with asyncio.timeout(remaining):
                async for event in stream.stream(
                    core.list_namespaced_pod,
                    namespace,
                    field_selector=f"metadata.name={name}",
                    timeout_seconds=max(1, int(remaining)),
                ):
                    if event["type"] == "DELETED":
                        raise SandboxCreationFailed(f"sandbox pod {name} was deleted while starting")
                    last = pod_state(event["raw_object"])
                    if last.phase is Phase.RUNNING and last.ip is not None:
                        return last.ip
                    if last.phase is Phase.FAILED:
                        raise SandboxCreationFailed(f"sandbox pod {name} failed to start: {last.reason}")
        except TimeoutError:
            break
        except ApiException as error:
            if error.status not in (410, 500, 503, 504):
                raise SandboxCreationFailed(f"cannot watch sandbox pod {name}: {api_error(error)}") from error
        finally:
            await stream.close()
    raise SandboxCreationFailed(f"sandbox pod {name} not running within {within:g} s: {last.reason}")


async def wait_gone(core: Any, namespace: str, name: str, *, resource_version: str | None, within: float) -> bool:
    """Whether the pod disappeared within ``within`` seconds (watching from
    ``resource_version``, the one its deletion returned, so that no event is missed)."""
    stream = watch.Watch()
    arguments: dict[str, Any] = {"field_selector": f"metadata.name={name}", "timeout_seconds": max(1, int(within))}
    if resource_version is not None:
        arguments["resource_version"] = resource_version
    try:
        async with asyncio.timeout(within):
            async for event in stream.stream(core.list_namespaced_pod, namespace, **arguments):
                if event["type"] == "DELETED":
                    return True
    except TimeoutError:
        return False
    except ApiException as error:
        if error.status != 410:
            raise
    finally:
        await stream.close()
    try:
        await core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False
