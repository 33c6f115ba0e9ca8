"""The ingress: GitHub, Linear and Slack webhooks, verified, de-duplicated, routed to stable
threads over NATS, and answered only once JetStream has them.

The path of a delivery: :mod:`.webhooks` (endpoints, from the channel map) → the channel's
adapter (signature, then parse) → :mod:`.accept` (claim + :mod:`.lookup`, :mod:`.routing` with
:mod:`.resolve_thread` and :mod:`.authorize`, :mod:`.dispatch`) → :mod:`.notify` (👀 after
answering).
"""

from drydock.services import Service
from services.ingress.app import listens, router, run

service = Service(
    name="ingress",
    description="webhooks from GitHub, Linear and Slack, routed to threads",
    run=run,
    listens=listens,
    in_dev=False,
    needs_crypto_keys=False,
    http_workers=True,
)

__all__ = ["router", "service"]
