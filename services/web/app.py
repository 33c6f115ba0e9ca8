"""The web-only process's app: its routers, declared here and nowhere else, and the module-level
ASGI object ``langgraph.json`` names (its lifespan connects to NATS and Redis from the environment).

The web process is where the ingress and the dashboard are put together, so it is the one
service that imports others (their router factories only)."""

from drydock.http import RouterFactory, create_app
from services.dashboard import router as dashboard
from services.ingress import router as ingress

ROUTERS: list[RouterFactory] = [dashboard, ingress]
"""The router factories the web app mounts, in order."""

app = create_app("web", routers=ROUTERS)
