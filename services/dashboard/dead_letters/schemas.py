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


class GivenUpDeliveryIO(BaseModel):
    """A GitHub webhook delivery still failing after every redelivery the sweep asked for."""

    guid: str
    id: int
    event: str
    action: str | None
    repository_id: int | None
    status_code: int
    delivered_at: str
    redeliveries: int
    given_up_at: str
    repository: str | None
    url: str | None
    """The page of what the webhook was about: the comment, issue or pull request."""
