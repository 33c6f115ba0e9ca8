"""A button under a message, for channels whose messages can carry one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Button:
    """A button under a message; its press comes back as an interaction naming ``action_id``."""

    action_id: str
    text: str
    value: str


APPROVE_ACTION = "drydock_approve"
"""The action id of the Approve button; pressing it is the owner's ``@drydock approve``."""
APPROVE_BUTTON = Button(action_id=APPROVE_ACTION, text="Approve", value="approve")
