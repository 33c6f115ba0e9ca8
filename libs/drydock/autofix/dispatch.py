"""Sending a repair run: a request appended to the source thread's inbox plus a coder wake.

The request's delivery id is derived from the pull request, its head revision and the trigger,
so a repeated dispatch (a redelivered event, a controller that took over mid-decision) is one
inbox message and one wake: JetStream drops the repeated ``Nats-Msg-Id``. The message comes
from the :attr:`~drydock.bus.envelopes.Channel.AUTOFIX` channel with the
:attr:`~drydock.bus.envelopes.Trigger.REPAIR` trigger and the repair's id in its references;
replies still go to the thread's own conversation.
"""

from __future__ import annotations

import structlog

from drydock.autofix.policy import Kind, Signal
from drydock.autofix.repairs import PullRef, Repair
from drydock.bus.client import Bus
from drydock.bus.envelopes import Author, Channel, InboxMessage, ReplyAddress, Trigger
from drydock.roles import Role
from drydock.threads.handoff import hand_off
from drydock.threads.metadata import ThreadMetadata, ThreadMetadataStore

log = structlog.get_logger(__name__)

AUTHOR = "Drydock autofix"


def repair_delivery_id(pull: PullRef, head_sha: str, kind: Kind) -> str:
    host, repository, number = pull
    return f"autofix:{host.lower()}:{repository.lower()}#{number}:{head_sha}:{kind.value}"


def _gate(repair: Repair, number: int) -> str:
    threshold = f"{repair.threshold:g}"
    return (
        f"This is a repair run, attempt {repair.attempt}. Before you push anything, call `report_confidence` "
        f"with how sure you are (0 to 1) that your change fixes it, and a short diagnosis. Pushes from this "
        f"thread are refused until a confidence of at least {threshold} is recorded. At or above {threshold}: "
        f"commit on the pull request's branch and push. Below it: do not push; explain your diagnosis and what "
        f"a person should look at on the pull request with `github_comment` (number {number})."
    )


def repair_text(repair: Repair, signal: Signal, *, branch: str, base: str) -> str:
    """The request the coder reads: what is wrong, where, and the confidence gate."""
    pr = f"{repair.repository}#{repair.number}"
    where = f"pull request {pr} (branch `{branch}`, head {repair.head_sha[:12]})"
    if repair.kind is Kind.CI:
        checks = ", ".join(f"`{name}`" for name in repair.checks) or "a check"
        link = f" Details: {signal.url}" if signal.url else ""
        what = (
            f"Autofix: {checks} failed on your {where}; the same checks pass on `{base}`.{link} Find the cause "
            "in your sandbox (fetch the branch, reproduce it, run the tests) and fix it on the branch."
        )
    elif repair.kind is Kind.CONFLICT:
        what = (
            f"Autofix: your {where} has merge conflicts with `{base}`. Fetch and merge `origin/{base}` into the "
            "branch, resolve the conflicts, and run the tests. If you cannot resolve them safely, explain why."
        )
    else:
        what = (
            f"Autofix: {signal.actor} requested changes on your {where}. Their review reached this thread as "
            "its own message; address it on the branch."
        )
    return f"{what}\n\n{_gate(repair, repair.number)}"


def _reply_to(repair: Repair, thread: ThreadMetadata | None) -> ReplyAddress:
    if thread is not None and thread.reply_to is not None:
        return thread.reply_to
    address = {"host": repair.host, "repository": repair.repository, "number": str(repair.number)}
    return ReplyAddress(channel=Channel.GITHUB, address=address | {"kind": "pull_request"})


def repair_message(
    repair: Repair, signal: Signal, thread: ThreadMetadata | None, *, branch: str, base: str
) -> InboxMessage:
    references = {
        "autofix_repair": repair.id,
        "pull_request": str(repair.number),
        "head_sha": repair.head_sha,
        "trigger": repair.kind.value,
        "attempt": str(repair.attempt),
    }
    if repair.checks:
        references["checks"] = ",".join(repair.checks)
    if signal.url:
        references["url"] = signal.url
    return InboxMessage(
        delivery_id=repair_delivery_id(repair.pull, repair.head_sha, repair.kind),
        thread_id=repair.thread_id,
        channel=Channel.AUTOFIX,
        author=Author(
            channel=Channel.AUTOFIX, external_id="autofix", name=AUTHOR, user_id=thread.owner if thread else None
        ),
        text=repair_text(repair, signal, branch=branch, base=base),
        repository=repair.repository,
        references=references,
        reply_to=_reply_to(repair, thread),
        trigger=Trigger.REPAIR,
    )


async def dispatch(bus: Bus, metadata: ThreadMetadataStore, message: InboxMessage) -> None:
    """Append the repair request to the thread's inbox, then wake its coder.
    Raises :class:`~drydock.bus.BusUnavailable` when either was not acknowledged."""
    await hand_off(bus, metadata, Role.CODER, message, reason=Trigger.REPAIR.value)


def loop_limit_notice(repairs: int, handle: str) -> str:
    return (
        f"Autofix stopped: I made {repairs} repair attempts on this pull request without getting it green, "
        "the most I may make on my own. A person needs to look at it now. "
        f"To let me try again, comment `{handle} autofix on`."
    )
