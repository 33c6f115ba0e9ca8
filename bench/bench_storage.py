"""Storage per finished thread: one coder run of 150 model calls (149 ``web_search`` calls and a
reply, the default step limit) on the whole pipeline (``tests/e2e/pipeline.py``), then what the
thread holds:

- in Redis, the ``MEMORY USAGE`` of every key that names the thread: its checkpoints, blobs,
  pending writes and timeline (the checkpointer's keys) and its own keys (metadata, lease,
  effects, usage);
- in NATS, the number of its messages in the inbox and events streams.

Then a follow-up comment: its run's first model request must carry the whole conversation,
from the one checkpoint the worker's compaction (:meth:`drydock.checkpoints.DrydockRedisSaver.acompact`)
kept.

Target: a finished 150-step thread holds less than 1 MB in Redis.
Run: ``pdm run bench storage``.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from pathlib import Path

from bench.bench_coder import Endings, released, responder_for, tool_results
from drydock.bus import subjects
from drydock.bus.streams import EVENTS_STREAM, INBOX_STREAM
from drydock.threads import ids
from tests.e2e.pipeline import ORG, Stage, pipeline
from tests.e2e.test_github_issue import mention

STEPS = 150
TARGET_BYTES = 1_000_000


async def stream_messages(stage: Stage, stream: str, subject: str) -> int:
    info = await stage.runtime.bus.js.stream_info(stream, subjects_filter=subject)
    return sum((info.state.subjects or {}).values())


async def redis_bytes(stage: Stage, thread_id: str) -> tuple[int, Counter[str], Counter[str]]:
    """The bytes of every key naming ``thread_id``: total, and bytes and keys by kind (the
    key's part after the prefix, up to the thread id)."""
    redis = stage.runtime.redis
    sizes: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    async for key in redis.scan_iter(match=f"*{thread_id}*", count=1000):
        name = key if isinstance(key, str) else key.decode()
        kind = name.split(thread_id, 1)[0].removeprefix(stage.runtime.keys.prefix).strip(":{") or "thread"
        sizes[kind] += int(await redis.memory_usage(name) or 0)
        counts[kind] += 1
    return sum(sizes.values()), sizes, counts


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-storage-") as scratch:
        async with pipeline(Path(scratch), responder=responder_for(STEPS - 1)) as stage:
            endings = Endings()
            await endings.follow(stage)
            thread_id = ids.github_issue("github.com", ORG, "widgets", 1)
            await stage.deliver_github("issue_comment", mention(stage, "@drydock search a lot", number=1))
            await endings.wait(lambda: endings.completed.get(thread_id, 0) >= 1 or bool(endings.failed), 900)
            if endings.failed:
                raise RuntimeError(f"the run did not complete: {endings.failed[0]}")
            await released(stage, thread_id)
            calls = len(stage.model.requests)
            # The checkpoint writes of the last steps go out beside the run (async durability).
            await asyncio.sleep(1)
            total, sizes, counts = await redis_bytes(stage, thread_id)
            for kind, size in sizes.most_common():
                print(f"  {kind:<28} {counts[kind]:>6} keys {size / 1024:10.1f} KiB", flush=True)
            inbox = await stream_messages(stage, INBOX_STREAM, subjects.inbox(thread_id))
            events = await stream_messages(stage, EVENTS_STREAM, subjects.events_of(thread_id))
            verdict = "met" if total < TARGET_BYTES else "MISSED"
            print(
                f"finished thread of {calls} model calls: {total / 1024:.1f} KiB in Redis "
                f"({sum(counts.values())} keys); {inbox} inbox and {events} event messages in NATS; "
                f"target < {TARGET_BYTES / 1e6:.0f} MB: {verdict}",
                flush=True,
            )
            # What was pruned must not be missed: a follow-up's run starts from what is left.
            before = len(stage.model.requests)
            await stage.deliver_github("issue_comment", mention(stage, "@drydock and now?", number=1))
            await endings.wait(lambda: endings.completed.get(thread_id, 0) >= 2 or bool(endings.failed), 300)
            seen = tool_results(stage.model.requests[before])
            print(
                f"  the follow-up's first model request carries {seen} of the {STEPS - 1} tool results: "
                f"{'the whole history' if seen == STEPS - 1 else 'HISTORY LOST'}",
                flush=True,
            )
