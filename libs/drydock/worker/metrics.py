"""The agent workers' runs as Prometheus metrics, on the process registry served at ``/metrics``:
how many end and how (the outcome a thread shows, :data:`drydock.threads.states.EVENT_OUTCOMES`),
how long they take, and how many are running now. Labelled by role only: threads, users and
repositories would be unbounded label values."""

from prometheus_client import Counter, Gauge, Histogram

from drydock.telemetry import REGISTRY

INTERRUPTED = "interrupted"
"""The outcome of a run that raised or whose worker stopped it: its wake's redelivery resumes it."""

RUNS = Counter(
    "drydock_runs",
    "Runs ended, by role and outcome (completed, step_limit, failed, stopped; interrupted: resumed later).",
    ["role", "outcome"],
    registry=REGISTRY,
)
RUN_SECONDS = Histogram(
    "drydock_run_seconds",
    "How long runs took, from the worker taking the wake to the run's end, by role and outcome.",
    ["role", "outcome"],
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200),
    registry=REGISTRY,
)
RUNS_IN_PROGRESS = Gauge(
    "drydock_runs_in_progress",
    "Runs this process is running now, by role.",
    ["role"],
    registry=REGISTRY,
    multiprocess_mode="livesum",
)
DEAD_LETTERS = Counter(
    "drydock_dead_letters",
    "Wakes given up after their last redelivery (each listed on the dashboard's /dead-letters), by role.",
    ["role"],
    registry=REGISTRY,
)
