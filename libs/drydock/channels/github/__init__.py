"""The GitHub channel: verify, parse, client, reply, status."""
