"""The channels: GitHub, Linear and Slack, each with the same shape.

- ``verify``: is the webhook delivery from the source? (signature, replay window)
- ``parse``: what does it ask for? (:mod:`drydock.channels.intents`)
- ``client``: the source's API, as the agent
- ``reply``: answer in the conversation; acknowledge pickup (👀)
- ``status``: show a run's state (check run, assistant status, agent activity)

:class:`~drydock.channels.outbound.Outbound` picks the channel from a reply address.
"""
