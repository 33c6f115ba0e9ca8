"""The graph state of roles whose turns start with their inbox messages (the reviewer and the
analyzer have no inbox middleware): the worker passes the messages and the inbox cursor as the
turn's input, so both are checkpointed together."""

from __future__ import annotations

from typing import NotRequired

from deepagents.graph import DeepAgentState


class InboxTurnState(DeepAgentState):
    inbox_cursor: NotRequired[int]
    """Sequence of the last inbox message the thread's turns have taken in (0: none yet)."""
