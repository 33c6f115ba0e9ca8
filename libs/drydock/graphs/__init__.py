"""Agent graphs. Each role's factory is named in ``langgraph.json``; :mod:`.manifest` resolves it."""
