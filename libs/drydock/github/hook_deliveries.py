"""The App's webhook deliveries as GitHub recorded them, and asking GitHub to deliver one again
(as the App itself, by its JWT). GitHub never redelivers a failed delivery by itself."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from drydock.errors import OutboundFailed
from drydock.github.installations import Installations
from drydock.github.pagination import pages
from drydock.github.responses import checked, failure


@dataclass(frozen=True)
class HookDelivery:
    """One attempt at delivering a webhook; a redelivery is a new attempt with the same ``guid``
    (the ``X-GitHub-Delivery`` header the ingress de-duplicates by)."""

    id: int
    guid: str
    delivered_at: datetime
    status_code: int
    """The receiver's HTTP status; 0 when there was no answer (a timeout, a refused connection)."""
    event: str
    redelivery: bool
    action: str | None = None
    repository_id: int | None = None

    @classmethod
    def of(cls, item: dict[str, Any]) -> HookDelivery:
        repository_id = item.get("repository_id")
        return cls(
            id=int(item["id"]),
            guid=str(item["guid"]),
            delivered_at=_delivered_at(item),
            status_code=int(item.get("status_code") or 0),
            event=str(item.get("event") or ""),
            redelivery=bool(item.get("redelivery")),
            action=str(item["action"]) if item.get("action") else None,
            repository_id=int(repository_id) if repository_id is not None else None,
        )

    @property
    def succeeded(self) -> bool:
        return 200 <= self.status_code < 300


def _delivered_at(item: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(item["delivered_at"]).replace("Z", "+00:00"))


class HookDeliveries(Installations):
    async def hook_deliveries(self, since: datetime, *, limit: int) -> list[HookDelivery]:
        """The App's delivery attempts from ``since`` on, newest first (GitHub's order), at most
        ``limit``; the listing has no date filter, so its pages are read until one reaches ``since``."""

        async def fetch(url: str, params: dict[str, str] | None) -> httpx.Response:
            return await self.send(self.as_app, "GET", url, params=params)

        try:
            items = await pages(
                fetch,
                "/app/hook/deliveries",
                "listing the App's webhook deliveries",
                limit=limit,
                until=lambda item: _delivered_at(item) < since,
            )
            return [HookDelivery.of(item) for item in items]
        except (KeyError, TypeError, ValueError) as error:
            raise OutboundFailed(f"GitHub listed a webhook delivery Drydock cannot read: {error!r}") from None

    async def delivered_payload(self, delivery_id: int) -> dict[str, Any]:
        """The webhook's payload as GitHub sent it in attempt ``delivery_id``."""
        response = await self.send(self.as_app, "GET", f"/app/hook/deliveries/{delivery_id}")
        request = checked(response, f"reading webhook delivery {delivery_id}").get("request")
        payload = request.get("payload") if isinstance(request, dict) else None
        if not isinstance(payload, dict):
            raise OutboundFailed(f"GitHub showed webhook delivery {delivery_id} without its payload")
        return payload

    async def redeliver(self, delivery_id: int) -> None:
        """Ask GitHub to deliver an attempt's payload again; GitHub answers 202 and sends it later."""
        response = await self.send(self.as_app, "POST", f"/app/hook/deliveries/{delivery_id}/attempts")
        if not response.is_success:
            raise failure(response, f"asking for webhook delivery {delivery_id} again")
