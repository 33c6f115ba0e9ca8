"""The Slack channel: verify, parse, client, reply, status."""
