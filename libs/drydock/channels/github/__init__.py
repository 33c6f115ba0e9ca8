"""The GitHub channel: verify, parse, client, reply, status; ``adapter.ADAPTER`` is what the
rest of Drydock reads of it (through :data:`drydock.channels.registry.CHANNELS`)."""
