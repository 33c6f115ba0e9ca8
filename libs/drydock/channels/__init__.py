"""The channels: GitHub, Linear and Slack, each with the same shape.

- ``verify``: is the webhook delivery from the source? (signature, replay window)
- ``parse``: what does it ask for? (:mod:`drydock.channels.intents`)
- ``conversation``: where it happens, and the conversation's thread key
- ``client``: the source's API, as the agent
- ``reply``: answer in the conversation; acknowledge pickup (👀)
- ``status``: show a run's state (check run, assistant status, agent activity)
- ``adapter``: ``ADAPTER``, the :class:`~drydock.channels.adapter.ChannelAdapter` tying them together

:data:`drydock.channels.registry.CHANNELS` lists the adapters; the ingress's endpoints and
:class:`~drydock.channels.outbound.Outbound` (which picks the channel from a reply address)
read only that map.
"""
