"""The garbage collector of a long-running service process.

Everything a service imports and builds before it serves (modules, settings, compiled graphs,
pydantic validators) lives as long as the process. Left in the collector's view, every full
collection walks all of it: in a coder worker about a quarter of a second per collection, which
with hundreds of runs in flight came every hundred model calls or so, and grew with the live
runs' heap (issue 23 item 4, ``docs/benchmarks.md``). Frozen, a full collection walks only what
was made since.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
"""Net allocations between young collections (Python's default: 700). A request's or a step's
objects die by reference counting within milliseconds; at 700 the collector ran many times a
step and promoted the objects of the requests or steps in flight to older generations, where only
a full collection frees them. In the ingress: a young collection every 14 deliveries under load
at 700 (about 9 µs of CPU per delivery), none in 5,500 deliveries at 10,000."""


def freeze_startup_objects(young_threshold: int = YOUNG_THRESHOLD) -> None:
    """Collect once, move every object alive now out of the collector's view for good, and
    collect the young generation every ``young_threshold`` net allocations. Call once, when the
    service has started and before it serves: whatever is alive then is never collected."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(young_threshold, older, oldest)
