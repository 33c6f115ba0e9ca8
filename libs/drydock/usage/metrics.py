"""Usage and cost as Prometheus metrics, on the process registry served at ``/metrics``.

Labelled by role, model and repository (bounded by the enabled repositories); runs, threads
and users would be unbounded label values, so their roll-ups live only in Redis
(:class:`~drydock.usage.ledger.UsageLedger`)."""

from prometheus_client import Counter

from drydock.telemetry import REGISTRY

MODEL_CALLS = Counter(
    "drydock_model_calls",
    "Model calls with usage reported, by role, model, repository and whether the model has a known price.",
    ["role", "model", "repository", "priced"],
    registry=REGISTRY,
)
MODEL_TOKENS = Counter(
    "drydock_model_tokens",
    "Tokens of model calls by kind (input, cached_input, output, reasoning); input includes cached, output reasoning.",
    ["role", "model", "repository", "kind"],
    registry=REGISTRY,
)
MODEL_COST = Counter(
    "drydock_model_cost_usd",
    "Cost of model calls with a known price, in US dollars at list price.",
    ["role", "model", "repository"],
    registry=REGISTRY,
)
