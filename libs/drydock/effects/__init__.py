"""Writes outside Drydock, made once per tool call position.

Every action that changes something on a code host, chat or tracker goes through
:meth:`Effects.once`, keyed by the tool call's position in the thread's run (the graph step and
the call's index in the model's message, :mod:`drydock.effects.calls`), not by the model's tool
call id, which changes when a step lost with its checkpoint is asked again: a ledger in
Redis records the claim before the write and the result after it, and where the external API
allows, the written object carries a marker (:mod:`drydock.effects.markers`) that a replay looks
up when the ledger holds a claim without a result. A replay after a crash at any point finds the
first write instead of making a second.
"""

from drydock.effects.calls import bound_call, current_call
from drydock.effects.ledger import EffectLedger, LedgerEntry
from drydock.effects.markers import marked, marker
from drydock.effects.once import Effects

__all__ = ["EffectLedger", "Effects", "LedgerEntry", "bound_call", "current_call", "marked", "marker"]
