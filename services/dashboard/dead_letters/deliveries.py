"""GitHub webhook deliveries the redelivery sweep gave up on, asked for again by an
administrator (:mod:`drydock.channels.github.given_up`)."""

from __future__ import annotations

from drydock.channels.github.given_up import GivenUpDeliveries, GivenUpDelivery
from drydock.errors import ChannelNotConfigured, OutboundFailed
from drydock.github import GithubClient
from services.dashboard.errors import Conflict, NotFound, github_failure

GUID = r"^[A-Za-z0-9-]{1,64}$"


async def deliver_again(records: GivenUpDeliveries, github: GithubClient, guid: str) -> GivenUpDelivery:
    """Ask GitHub to send ``guid`` again; GitHub answers at once and sends it shortly after."""
    given_up = await records.get(guid)
    if given_up is None:
        raise NotFound(f"no given-up GitHub delivery {guid}")
    try:
        await records.redeliver(given_up, github)
    except ChannelNotConfigured as error:
        raise Conflict(f"GitHub cannot be asked: {error}") from None
    except OutboundFailed as failure:
        if failure.status == 404:
            await records.forget(guid)
            raise NotFound(
                f"GitHub no longer keeps delivery {guid} (it keeps deliveries for three days); its record is dropped"
            ) from None
        raise github_failure(failure) from None
    return given_up
