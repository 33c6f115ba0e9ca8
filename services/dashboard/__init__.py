"""The dashboard: sign-in, profiles, team defaults, enabled repositories, review styles, the
threads API under ``/api/v1`` and the web UI on top of it.

Each domain is a folder with its endpoints, service and schemas (profiles, team, repositories,
review_styles, threads); ``auth`` signs people in and guards every endpoint; ``pages`` renders
the UI over the same services. Everything is on one router (:func:`router`), which the web-only
process mounts beside the ingress.
"""

from drydock.services import Service
from services.dashboard.app import listens, router, run

service = Service(
    name="dashboard",
    description="sign-in, settings, the threads API and the web UI",
    run=run,
    listens=listens,
    in_dev=False,
    http_workers=True,
)

__all__ = ["router", "service"]
