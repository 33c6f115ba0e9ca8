"""The web app as a module-level ASGI object (named in ``langgraph.json``); its lifespan
connects to NATS and Redis from the environment."""

from drydock.http import create_app, web_routers

app = create_app("web", routers=web_routers())
