"""Who the agent is in Linear when ``DRYDOCK_LINEAR_AGENT_USER_ID`` does not say.

Comments by that user never trigger. With a personal API key and the setting unset, the
agent's own comments ("On it.", its replies) would come back as comments by the key's owner,
and if that person linked their Linear account, each would be routed as a follow-up, be
acknowledged by another comment, and so on. So the ingress asks Linear whom the key acts as,
again until Linear answers, and ignores that user's comments from then on.
"""

from __future__ import annotations

import asyncio

import structlog

from drydock.channels.errors import OutboundFailed
from drydock.errors import describe
from services.ingress.accept import Ingress

log = structlog.get_logger(__name__)

RETRY_SECONDS = 30.0


def needs_linear_agent(ingress: Ingress) -> bool:
    linear = ingress.settings.linear
    return linear.agent_user_id is None and linear.webhook_secret is not None and ingress.outbound.linear is not None


async def learn_linear_agent(ingress: Ingress, *, retry: float = RETRY_SECONDS) -> None:
    """Set the ingress's Linear agent user from Linear's ``viewer``, asking every ``retry``
    seconds until Linear answers."""
    client = ingress.outbound.linear
    if client is None:
        return
    while True:
        try:
            agent = await client.viewer_id()
        except OutboundFailed as error:
            log.error(
                "Linear agent user unknown: the agent's own Linear comments are routed as anyone's until "
                "Linear answers (or set DRYDOCK_LINEAR_AGENT_USER_ID)",
                error=describe(error),
                retry_in=retry,
            )
            await asyncio.sleep(retry)
            continue
        linear = ingress.settings.linear.model_copy(update={"agent_user_id": agent})
        ingress.settings = ingress.settings.model_copy(update={"linear": linear})
        log.info("Linear agent user learned from the API key", agent_user_id=agent)
        return
