"""The coder: works in its thread's sandbox and delivers (commits, pushes, opens or updates the
pull request and replies in the source channel) through explicit tools."""

from __future__ import annotations

from drydock.roles import Role
from drydock.tools import (
    fetch_url,
    github_comment,
    http_request,
    linear,
    open_pull_request,
    report_confidence,
    request_review,
    schedule_wakeup,
    slack_reply,
    submit_plan,
    update_pull_request,
    web_search,
)
from drydock.worker.role_spec import RoleSpec

TOOLS: tuple[str, ...] = (
    http_request.NAME,
    web_search.NAME,
    fetch_url.NAME,
    linear.NAME,
    github_comment.NAME,
    open_pull_request.NAME,
    update_pull_request.NAME,
    request_review.NAME,
    schedule_wakeup.NAME,
    slack_reply.NAME,
    report_confidence.NAME,
    submit_plan.NAME,
)
"""The coder's own tools, in the order the model sees them."""

SPEC = RoleSpec(role=Role.CODER, tools=TOOLS, graph=Role.CODER.value)
"""The defaults: the inbox middleware opens each turn, the checkout is snapshotted after each
turn and its changes recorded, and a spend limit pauses the thread."""
