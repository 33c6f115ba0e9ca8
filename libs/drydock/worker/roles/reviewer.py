"""The reviewer: read-only reviews of pull requests, with findings published as GitHub reviews.

Its runs are prepared by reading the pull request and its files from GitHub (the current head,
not the one the triggering event named, so a run after several pushes reviews the latest),
keeping them as the thread's review target, checking the head out (detached) in the sandbox, and
reading the repository's current guidelines. The first review on a repository asks the analyzer
to bootstrap its guidelines (``review.auto_bootstrap``). The check run showing the run's status
moves to the head.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.channels.errors import OutboundFailed
from drydock.credentials.user_tokens import app_authorization
from drydock.middleware.scoped_instructions import MAX_INSTRUCTION_BYTES, instruction_text
from drydock.review.analysis import AnalysisProgress, request_analysis
from drydock.review.checkouts import ReviewCheckout
from drydock.review.guidelines import GuidelinesStore
from drydock.review.target import ReviewTarget, ReviewTargets, fetch_target
from drydock.roles import Role
from drydock.threads.metadata import ThreadMetadataStore
from drydock.tools import add_finding, fetch_url, http_get, list_findings, publish_review, update_finding, web_search
from drydock.worker.role_spec import Prepared, RoleSpec, RunEnded, RunSetup

TOOLS: tuple[str, ...] = (
    http_get.NAME,
    web_search.NAME,
    fetch_url.NAME,
    list_findings.NAME,
    add_finding.NAME,
    update_finding.NAME,
    publish_review.NAME,
)
"""Read-oriented network tools and the findings. Nothing that writes files, commits, pushes or
opens pull requests (the graph adds the read-only ``git`` tool, bound to the sandbox)."""


def _pull_number(setup: RunSetup) -> int:
    address = setup.scope.reply_to.address
    if setup.scope.reply_to.channel is not Channel.GITHUB or not address.get("number", "").isdigit():
        raise RunEnded("This reviewer thread names no pull request to review.")
    return int(address["number"])


async def prepare_review(setup: RunSetup) -> Prepared:
    """Check the pull request's head out and keep it as the thread's review target."""
    scope = setup.scope
    if scope.repository is None or setup.checkout is None:
        raise RunEnded("This reviewer thread names no repository to review.")
    client = setup.github_client()
    number = _pull_number(setup)
    try:
        authorization = await app_authorization(client, scope.repository)
        target = await fetch_target(client, authorization, scope.repository, number)
    except OutboundFailed as failure:
        if failure.status in {403, 404}:
            raise RunEnded(f"I cannot read pull request #{number} of {scope.repository}: {failure.reason}") from None
        raise
    await ReviewTargets(setup.redis, setup.keys).save(scope.thread_id, target)
    instructions = await _check_out_head(setup, target)
    host = setup.host
    guidelines = await GuidelinesStore(setup.redis, setup.keys, host=host).current(scope.repository)
    if setup.review.auto_bootstrap and await AnalysisProgress(setup.redis, setup.keys, host=host).claim_bootstrap(
        scope.repository
    ):
        await request_analysis(
            setup.bus, setup.redis, setup.keys, host=host, repository=scope.repository, mode="bootstrap",
            requested_by="reviewer",
        )  # fmt: skip
    checkout = ReviewCheckout(
        repository=setup.checkout.repository,
        path=setup.checkout.path,
        default_branch=setup.checkout.default_branch,
        instructions=instructions,
        target=target,
        guidelines=guidelines,
    )
    return Prepared(scope=replace(scope, reply_to=await _status_at_head(setup, target)), checkout=checkout)


async def _check_out_head(setup: RunSetup, target: ReviewTarget) -> str | None:
    """Fetch the head (GitHub's ``refs/pull/N/head``, which also covers forks; else the head
    branch) and the base, and check the head out detached; returns the head's AGENTS.md."""
    assert setup.checkout is not None
    path = shlex.quote(setup.checkout.path)
    number, head, base = target.number, shlex.quote(target.head_ref), shlex.quote(target.base_ref)
    script = "\n".join(
        [
            "set -e",
            f"cd {path}",
            f"git fetch --quiet origin +refs/pull/{number}/head:refs/remotes/origin/pull/{number} 2>/dev/null"
            f" || git fetch --quiet origin +refs/heads/{head}:refs/remotes/origin/{head}",
            f"git fetch --quiet origin +refs/heads/{base}:refs/remotes/origin/{base} || true",
            "git reset --quiet --hard",
            "git clean -fdq",
            f"git checkout --quiet --detach {shlex.quote(target.head_sha)}",
        ]
    )
    result = await setup.backend.run(script, time_limit=600)
    if result.exit_code != 0:
        tail = result.output.strip()[-600:]
        raise RunEnded(
            f"I could not check out the head `{target.head_sha[:12]}` of #{number} in my sandbox:\n```\n{tail}\n```"
        )
    [agents_md] = await setup.backend.adownload_files(
        [f"{setup.checkout.path}/AGENTS.md"], max_file_bytes=MAX_INSTRUCTION_BYTES
    )
    return instruction_text(agents_md.content)


async def _status_at_head(setup: RunSetup, target: ReviewTarget) -> ReplyAddress:
    """The reply address with the status check on the current head (a new check run per head)."""
    reply_to = setup.scope.reply_to
    if reply_to.address.get("head_sha") == target.head_sha:
        return reply_to
    address = {k: v for k, v in reply_to.address.items() if k != "check_run_id"} | {"head_sha": target.head_sha}
    moved = reply_to.model_copy(update={"address": address})
    await ThreadMetadataStore(setup.redis, setup.keys).set_reply_to(setup.scope.thread_id, moved)
    return moved


SPEC = RoleSpec(
    role=Role.REVIEWER,
    tools=TOOLS,
    graph=Role.REVIEWER.value,
    prepare=prepare_review,
    inbox_at_start=True,
    snapshots=False,
    changes=False,
    pauses=False,
)
"""The reviewer's checkout is re-derived from the pull request on every run, so it is never
snapshotted, and its sandbox may always be replaced."""
