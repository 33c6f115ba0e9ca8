"""Webhook to first model call on a real cluster, warm sandbox: Drydock installed with Helm
(``integration.cluster.whole_path``: a fresh release, the GitHub and model doubles on this
machine), one thread whose sandbox pod is running; then follow-ups one at a time, each timed from
the signed POST to the ingress Service until the model double receives the run's first request.
Between follow-ups the run has released the thread (warm and idle, as ``pdm run bench coder``
measures it in one process).

Run: ``KUBECONFIG=... pdm run bench cluster_path`` (images and, on the lab, ``lab_network``: see
README "Drydock on a real cluster"). Without ``KUBECONFIG`` it prints that it skipped.
"""

from __future__ import annotations

import asyncio
import functools
import os
import tempfile
import time
from pathlib import Path

from bench.harness import Figures, report
from drydock.threads import ids
from integration.cluster.release import ClusterUnavailable, Release
from integration.cluster.whole_path import ORG, ClusterStage, cluster_stage
from tests.fakes.openai_server import Script
from tests.waiting import eventually

FOLLOW_UPS = 12
NUMBER = 3
MARKER = "[bench: warm]"
RELEASE = Release("drydock-bench", "drydock-bench", "drydock-bench-infra", "drydock-bench-sandboxes")
RUN_WITHIN = 300.0


async def _released(stage: ClusterStage, thread_id: str) -> bool:
    return not await stage.runtime.redis.exists(stage.runtime.keys.lease(thread_id))


async def warm_follow_ups(stage: ClusterStage) -> Figures:
    script = Script().tool_call("execute", command="cd widgets && git status --short && echo ready").reply("Ready.")
    for _ in range(FOLLOW_UPS):
        script.reply("Noted.")
    stage.conversations.add(MARKER, script)
    thread_id = ids.github_issue("github.com", ORG, "widgets", NUMBER)
    await stage.deliver_github("issue_comment", stage.mention(NUMBER, f"@drydock get ready {MARKER}"))
    await eventually(
        lambda: stage.completed(thread_id), every=0.25, within=RUN_WITHIN, what="the first run (sandbox pod start)"
    )
    await eventually(
        lambda: _released(stage, thread_id), every=0.25, within=60, what="the thread's lease to be released"
    )
    latencies: list[float] = []
    started = time.perf_counter()
    for index in range(FOLLOW_UPS):
        before = len(stage.model.requests)
        sent = time.monotonic()
        response = await stage.deliver_github("issue_comment", stage.mention(NUMBER, f"@drydock and again {index}"))
        assert response.status_code == 200, response.text
        # A follow-up that never reaches the model is a lost message: fail, do not hang.
        async with asyncio.timeout(120):
            await stage.model.wait_for_requests(before + 1)
        latencies.append((stage.model.requests[before].received_at - sent) * 1000)
        await eventually(
            functools.partial(stage.completed, thread_id, index + 2),
            every=0.25,
            within=120,
            what=f"follow-up {index}",
        )
        await eventually(
            lambda: _released(stage, thread_id), every=0.25, within=60, what="the thread's lease to be released"
        )
    return Figures(
        "webhook → first model call on the cluster, warm sandbox", FOLLOW_UPS, time.perf_counter() - started, latencies
    )


async def main() -> None:
    if not os.environ.get("KUBECONFIG"):
        print("cluster_path: skipped, KUBECONFIG is not set (no cluster to install Drydock on)")
        return
    with tempfile.TemporaryDirectory(prefix="drydock-bench-cluster-") as scratch:
        try:
            async with cluster_stage(Path(scratch), RELEASE) as stage:
                print(f"release installed in {stage.timings['install']:.0f} s", flush=True)
                report(await warm_follow_ups(stage), target_p50_ms=150)
        except ClusterUnavailable as reason:
            print(f"cluster_path: skipped, {reason}")
