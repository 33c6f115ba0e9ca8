"""The dead-letter API's shapes."""

from __future__ import annotations

from pydantic import BaseModel


class DeadLetterIO(BaseModel):
    """A wake that used up its deliveries."""

    id: str
    thread_id: str
    role: str
    deliveries: int
    error: str
    buried_at: str
