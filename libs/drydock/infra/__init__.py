"""Infrastructure Drydock runs on: embedded NATS and Valkey for development and tests, connections."""
