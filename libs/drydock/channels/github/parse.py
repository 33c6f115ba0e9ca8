"""GitHub webhook deliveries → intents.

Routed events: comments and reviews (messages for the coder), pull requests (the reviewer and
the autofix controller), pushes to agent branches, and CI events (the autofix controller).
Reviews requesting changes, review comments and pull request comments shaped like an autofix
command (``@handle autofix on|off``) are also forwarded to the autofix controller.
Everything else is acknowledged and ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from drydock.accounts import repository_name
from drydock.bus.envelopes import Channel, GithubEvent, ReplyAddress
from drydock.channels.commands import looks_like_autofix_command
from drydock.channels.errors import MalformedDelivery
from drydock.channels.github.conversation import GithubConversation
from drydock.channels.intents import (
    BranchPush,
    Delivery,
    Forward,
    Intent,
    Message,
    ReviewRequest,
    Sender,
)
from drydock.channels.payload import (
    Object,
    account_id,
    delivery_id,
    flag,
    form_payload,
    identifier,
    integer,
    load_json,
    obj,
    optional_obj,
    optional_string,
    optional_time,
    string,
)
from drydock.threads.pr_records import BRANCH_PREFIX, branch_short_id

EVENT_HEADER = "x-github-event"
DELIVERY_HEADER = "x-github-delivery"
_EVENT_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")

FORWARDED_EVENTS = frozenset(
    {"check_run", "check_suite", "workflow_run", "pull_request", "pull_request_review", "pull_request_review_comment"}
)
"""Events the autofix controller consumes from ``drydock.github.{event}`` (and ``issue_comment``
when it is an autofix command)."""
REVIEW_ACTIONS = frozenset({"opened", "ready_for_review", "synchronize"})
"""Pull request actions that ask for a review on repositories with the reviewer enabled."""


def _payload(headers: Mapping[str, str], body: bytes) -> Object:
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json":
        return load_json(body)
    if content_type == "application/x-www-form-urlencoded":
        return form_payload(body)
    raise MalformedDelivery(f"content type {content_type or 'none'!r} is not application/json or a form")


class _Context:
    """One delivery's shared facts: where it comes from, and who the agent is."""

    def __init__(self, payload: Object, *, host: str, app_slug: str | None, delivery_id: str, event: str) -> None:
        self.payload = payload
        self.host = host
        self.bot_login = f"{app_slug}[bot]".lower() if app_slug else None
        self.delivery_id = delivery_id
        self.event = event
        repository = obj(payload, "repository")
        self.owner = string(obj(repository, "owner"), "login")
        self.repo = string(repository, "name")
        try:
            repository_name(self.full_name)
        except ValueError:
            raise MalformedDelivery("repository owner or name is not a GitHub name") from None
        installation = optional_obj(payload, "installation")
        self.installation_id = identifier(installation, "id") if installation else None

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    @property
    def action(self) -> str | None:
        return optional_string(self.payload, "action")

    def sender(self, where: str, association: str | None = None) -> Sender:
        """The sender from the user object at the dotted path ``where``."""
        user: Object = self.payload
        for key in where.split("."):
            user = obj(user, key)
        login = string(user, "login")
        agent = self.bot_login is not None and login.lower() == self.bot_login
        bot = agent or user.get("type") == "Bot" or login.lower().endswith("[bot]")
        external_id = account_id(identifier(user, "id"), f"{where}.id")
        return Sender(Channel.GITHUB, external_id, login, bot=bot, agent=agent, association=association)

    def reply_to(self, number: int, **extra: str) -> ReplyAddress:
        address = {"host": self.host, "repository": self.full_name, "number": str(number), **extra}
        if self.installation_id:
            address["installation_id"] = self.installation_id
        return ReplyAddress(channel=Channel.GITHUB, address=address)

    def references(self, **extra: str) -> dict[str, str]:
        found = {"repository": self.full_name, "event": self.event, **extra}
        if self.installation_id:
            found["installation_id"] = self.installation_id
        return found

    def conversation(self, number: int, *, pull_request: bool, head_ref: str | None = None) -> GithubConversation:
        return GithubConversation(self.host, self.owner, self.repo, number, pull_request, head_ref)

    def ignored(self, reason: str) -> Delivery:
        return Delivery(Channel.GITHUB, self.delivery_id, self.event, ignored=reason)

    def routed(self, *intents: Intent, identity: str | None = None) -> Delivery:
        return Delivery(Channel.GITHUB, self.delivery_id, self.event, intents=intents, identity=identity)

    def identity(self, object_id: str) -> str:
        """``Delivery.identity`` of the event's object ``object_id``: ids of different kinds of
        object may be equal, and one object is delivered again for each of its actions."""
        return f"{self.event}.{self.action}:{object_id}"


def _issue_comment(ctx: _Context) -> Delivery:
    if ctx.action != "created":
        return ctx.ignored(f"issue_comment action {ctx.action!r} is not routed")
    issue, comment = obj(ctx.payload, "issue"), obj(ctx.payload, "comment")
    number = integer(issue, "number")
    pull_request = optional_obj(issue, "pull_request") is not None
    comment_id = identifier(comment, "id")
    kind = "pull_request" if pull_request else "issue"
    message = Message(
        delivery_id=ctx.delivery_id,
        event="issue_comment.created",
        conversation=ctx.conversation(number, pull_request=pull_request),
        sender=ctx.sender("comment.user", optional_string(comment, "author_association")),
        text=optional_string(comment, "body") or "",
        reply_to=ctx.reply_to(number, kind=kind),
        repository=ctx.full_name,
        written_at=optional_time(comment, "created_at"),
        references=ctx.references(
            **{kind: str(number)},
            comment_id=comment_id,
            comment_kind="issue_comment",
            url=optional_string(comment, "html_url") or "",
        ),
    )
    identity = ctx.identity(comment_id)
    if pull_request and looks_like_autofix_command(message.text):
        return ctx.routed(message, _forward(ctx), identity=identity)
    return ctx.routed(message, identity=identity)


def _issues(ctx: _Context) -> Delivery:
    if ctx.action != "opened":
        return ctx.ignored(f"issues action {ctx.action!r} is not routed")
    issue = obj(ctx.payload, "issue")
    number = integer(issue, "number")
    title, body = optional_string(issue, "title") or "", optional_string(issue, "body") or ""
    message = Message(
        delivery_id=ctx.delivery_id,
        event="issues.opened",
        conversation=ctx.conversation(number, pull_request=False),
        sender=ctx.sender("issue.user", optional_string(issue, "author_association")),
        text=f"{title}\n\n{body}".strip(),
        reply_to=ctx.reply_to(number, kind="issue"),
        repository=ctx.full_name,
        written_at=optional_time(issue, "created_at"),
        references=ctx.references(
            issue=str(number), comment_kind="issue", url=optional_string(issue, "html_url") or ""
        ),
    )
    return ctx.routed(message, identity=ctx.identity(identifier(issue, "id")))


def _pull_request_facts(ctx: _Context) -> tuple[Object, int, str, str]:
    pull = obj(ctx.payload, "pull_request")
    head = obj(pull, "head")
    return pull, integer(pull, "number"), string(head, "ref"), string(head, "sha")


def _own_branch(ctx: _Context, pull: Object, head_ref: str) -> str | None:
    """The head branch when it is in the repository itself; a fork's branch (or a deleted
    fork's) is named by whoever forked, so it never identifies an agent's branch."""
    head_repo = optional_obj(obj(pull, "head"), "repo")
    full_name = optional_string(head_repo, "full_name") if head_repo is not None else None
    return head_ref if full_name is not None and full_name.lower() == ctx.full_name.lower() else None


def _review_comment(ctx: _Context) -> Delivery:
    if ctx.action != "created":
        return ctx.ignored(f"pull_request_review_comment action {ctx.action!r} is not routed")
    comment = obj(ctx.payload, "comment")
    pull, number, head_ref, head_sha = _pull_request_facts(ctx)
    comment_id = identifier(comment, "id")
    thread_root = str(comment.get("in_reply_to_id") or comment_id)
    references = ctx.references(
        pull_request=str(number),
        comment_id=comment_id,
        comment_kind="review_comment",
        path=optional_string(comment, "path") or "",
        line=str(comment.get("line") or ""),
        head_ref=head_ref,
        head_sha=head_sha,
        url=optional_string(comment, "html_url") or "",
    )
    message = Message(
        delivery_id=ctx.delivery_id,
        event="pull_request_review_comment.created",
        conversation=ctx.conversation(number, pull_request=True, head_ref=_own_branch(ctx, pull, head_ref)),
        sender=ctx.sender("comment.user", optional_string(comment, "author_association")),
        text=optional_string(comment, "body") or "",
        reply_to=ctx.reply_to(number, kind="pull_request", review_comment_id=thread_root),
        repository=ctx.full_name,
        written_at=optional_time(comment, "created_at"),
        references=references,
    )
    return ctx.routed(message, _forward(ctx), identity=ctx.identity(comment_id))


def _review(ctx: _Context) -> Delivery:
    if ctx.action != "submitted":
        return ctx.ignored(f"pull_request_review action {ctx.action!r} is not routed")
    review = obj(ctx.payload, "review")
    body = optional_string(review, "body")
    changes_requested = (optional_string(review, "state") or "").lower() == "changes_requested"
    forwards = (_forward(ctx),) if changes_requested else ()
    review_id = identifier(review, "id")
    if not body:
        if not forwards:
            return ctx.ignored("a review without a body carries no message")
        return ctx.routed(*forwards, identity=ctx.identity(review_id))
    pull, number, head_ref, head_sha = _pull_request_facts(ctx)
    references = ctx.references(
        pull_request=str(number),
        review_id=review_id,
        review_state=optional_string(review, "state") or "",
        comment_kind="review",
        head_ref=head_ref,
        head_sha=head_sha,
        url=optional_string(review, "html_url") or "",
    )
    message = Message(
        delivery_id=ctx.delivery_id,
        event="pull_request_review.submitted",
        conversation=ctx.conversation(number, pull_request=True, head_ref=_own_branch(ctx, pull, head_ref)),
        sender=ctx.sender("review.user", optional_string(review, "author_association")),
        text=body,
        reply_to=ctx.reply_to(number, kind="pull_request"),
        repository=ctx.full_name,
        written_at=optional_time(review, "submitted_at"),
        references=references,
    )
    return ctx.routed(message, *forwards, identity=ctx.identity(review_id))


def _forward(ctx: _Context) -> Forward:
    event = GithubEvent(
        delivery_id=ctx.delivery_id,
        event=ctx.event,
        action=ctx.action,
        repository=ctx.full_name,
        payload=dict(ctx.payload),
    )
    return Forward(event)


def _pull_request(ctx: _Context) -> Delivery:
    forward = _forward(ctx)
    if ctx.action not in REVIEW_ACTIONS:
        return ctx.routed(forward)
    pull, number, head_ref, head_sha = _pull_request_facts(ctx)
    review = ReviewRequest(
        delivery_id=ctx.delivery_id,
        event=f"pull_request.{ctx.action}",
        conversation=ctx.conversation(number, pull_request=True, head_ref=_own_branch(ctx, pull, head_ref)),
        sender=ctx.sender("pull_request.user", optional_string(pull, "author_association")),
        action=ctx.action or "",
        title=optional_string(pull, "title") or "",
        draft=flag(pull, "draft"),
        head_sha=head_sha,
        reply_to=ctx.reply_to(number, kind="pull_request", head_sha=head_sha),
        references=ctx.references(
            pull_request=str(number), head_ref=head_ref, head_sha=head_sha, url=optional_string(pull, "html_url") or ""
        ),
    )
    return ctx.routed(forward, review)


def _push(ctx: _Context) -> Delivery:
    ref = string(ctx.payload, "ref")
    if not ref.startswith("refs/heads/") or (
        not ref.startswith("refs/heads/" + BRANCH_PREFIX) and branch_short_id(ref) is None
    ):
        return ctx.ignored("push to a branch that is not an agent branch")
    if flag(ctx.payload, "deleted"):
        return ctx.ignored("branch deletion")
    branch = ref.removeprefix("refs/heads/")
    head_sha = string(ctx.payload, "after")
    commits = ctx.payload.get("commits")
    count = len(commits) if isinstance(commits, list) else 0
    sender = ctx.sender("sender")
    push = BranchPush(
        delivery_id=ctx.delivery_id,
        event="push",
        host=ctx.host,
        owner=ctx.owner,
        repo=ctx.repo,
        branch=branch,
        head_sha=head_sha,
        sender=sender,
        text=f"{sender.name} pushed {count} commit(s) to {branch}; the head is now {head_sha}.",
        reply_to=ReplyAddress(
            channel=Channel.GITHUB,
            address={"host": ctx.host, "repository": ctx.full_name, "kind": "branch", "branch": branch},
        ),
    )
    return ctx.routed(push)


def _ci(ctx: _Context) -> Delivery:
    return ctx.routed(_forward(ctx))


_HANDLERS: dict[str, Callable[[_Context], Delivery]] = {
    "issue_comment": _issue_comment,
    "issues": _issues,
    "pull_request_review_comment": _review_comment,
    "pull_request_review": _review,
    "pull_request": _pull_request,
    "push": _push,
    "check_run": _ci,
    "check_suite": _ci,
    "workflow_run": _ci,
}


def parse(headers: Mapping[str, str], body: bytes, *, host: str, app_slug: str | None = None) -> Delivery:
    """Parse a verified delivery. Raises :class:`MalformedDelivery` when its headers or body
    are not what GitHub sends for the event."""
    delivery = delivery_id(headers.get(DELIVERY_HEADER), "X-GitHub-Delivery header")
    event = headers.get(EVENT_HEADER, "")
    if not _EVENT_NAME.fullmatch(event):
        raise MalformedDelivery("missing or invalid X-GitHub-Event header")
    payload = _payload(headers, body)
    if event == "ping":
        return Delivery(Channel.GITHUB, delivery, event, ignored="ping")
    handler = _HANDLERS.get(event)
    if handler is None:
        return Delivery(Channel.GITHUB, delivery, event, ignored=f"event {event!r} is not routed")
    return handler(_Context(payload, host=host, app_slug=app_slug, delivery_id=delivery, event=event))
