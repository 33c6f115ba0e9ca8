"""The Linear channel: verify, parse, client, reply, status."""
