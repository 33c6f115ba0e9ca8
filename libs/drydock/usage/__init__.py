"""Token usage and cost of model calls: read from each provider response, priced with the model
catalog's price table, rolled up in Redis per run, thread, user, team, repository and model
(daily, kept ``DRYDOCK_MODELS_USAGE_RETENTION_DAYS``) and counted in Prometheus metrics."""

from drydock.usage.calls import CallUsage
from drydock.usage.ledger import Dimension, UsageLedger, UsageScope, UsageTotals
from drydock.usage.recorder import UsageRecorder

__all__ = ["CallUsage", "Dimension", "UsageLedger", "UsageRecorder", "UsageScope", "UsageTotals"]
