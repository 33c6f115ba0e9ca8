"""How reviewer and analyzer runs are prepared before their agents are built (the
:class:`~drydock.worker.agent_runs.RoleHooks` of their workers).

Reviewer: read the pull request and its files from GitHub (the current head, not the one the
triggering event named, so a run after several pushes reviews the latest), keep them as the
thread's review target, check the head out (detached) in the sandbox, and read the repository's
current guidelines. The first review on a repository asks the analyzer to bootstrap its
guidelines (``review.auto_bootstrap``). The check run showing the run's status moves to the head.

Analyzer: until bootstrap has finished every run is a bootstrap; afterwards a continual run.
The evidence is gathered here and kept under the thread; a run with too little (or no new)
evidence is skipped without calling the model.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

import structlog

from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.channels.errors import OutboundFailed
from drydock.credentials.user_tokens import app_authorization
from drydock.github import GithubClient
from drydock.review.analysis import (
    AnalysisProgress,
    BootstrapState,
    EvidenceStore,
    gather_bootstrap,
    gather_continual,
    request_analysis,
)
from drydock.review.checkouts import AnalysisCheckout, ReviewCheckout
from drydock.review.guidelines import GuidelinesStore
from drydock.review.target import ReviewTarget, ReviewTargets, fetch_target
from drydock.threads.fields import REPLY_TO
from drydock.threads.metadata import ThreadMetadataStore
from drydock.worker.agent_runs import RoleHooks, RunEnded, RunSetup, RunSkipped

log = structlog.get_logger(__name__)


def _github(setup: RunSetup) -> GithubClient:
    if setup.parts.outbound.github is None:
        raise RunEnded("GitHub is not configured for this Drydock installation; there is nothing to review.")
    return setup.parts.outbound.github


def _pull_number(setup: RunSetup) -> int:
    address = setup.scope.reply_to.address
    if setup.scope.reply_to.channel is not Channel.GITHUB or not address.get("number", "").isdigit():
        raise RunEnded("This reviewer thread names no pull request to review.")
    return int(address["number"])


async def prepare_review(setup: RunSetup) -> RunSetup:
    """Check the pull request's head out and keep it as the thread's review target."""
    scope, parts = setup.scope, setup.parts
    if scope.repository is None or setup.checkout is None:
        raise RunEnded("This reviewer thread names no repository to review.")
    client = _github(setup)
    number = _pull_number(setup)
    try:
        authorization = await app_authorization(client, scope.repository)
        target = await fetch_target(client, authorization, scope.repository, number)
    except OutboundFailed as failure:
        if failure.status in {403, 404}:
            raise RunEnded(f"I cannot read pull request #{number} of {scope.repository}: {failure.reason}") from None
        raise
    await ReviewTargets(parts.redis, parts.keys).save(scope.thread_id, target)
    instructions = await _check_out_head(setup, target)
    host = parts.settings.github.host
    guidelines = await GuidelinesStore(parts.redis, parts.keys, host=host).current(scope.repository)
    if parts.settings.review.auto_bootstrap and await AnalysisProgress(
        parts.redis, parts.keys, host=host
    ).claim_bootstrap(scope.repository):
        await request_analysis(
            parts.bus, parts.redis, parts.keys, host=host, repository=scope.repository, mode="bootstrap",
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
    return replace(setup, scope=replace(scope, reply_to=await _status_at_head(setup, target)), checkout=checkout)


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
    agents_md = (await setup.backend.adownload_files([f"{setup.checkout.path}/AGENTS.md"]))[0]
    return agents_md.content.decode(errors="replace") if agents_md.content is not None else None


async def _status_at_head(setup: RunSetup, target: ReviewTarget) -> ReplyAddress:
    """The reply address with the status check on the current head (a new check run per head)."""
    reply_to = setup.scope.reply_to
    if reply_to.address.get("head_sha") == target.head_sha:
        return reply_to
    address = {k: v for k, v in reply_to.address.items() if k != "check_run_id"} | {"head_sha": target.head_sha}
    moved = reply_to.model_copy(update={"address": address})
    metadata = ThreadMetadataStore(setup.parts.redis, setup.parts.keys)
    await metadata.update(setup.scope.thread_id, lambda _fields: {REPLY_TO: moved.model_dump_json()})
    return moved


async def prepare_analysis(setup: RunSetup) -> RunSetup:
    """Gather the run's evidence: bootstrap until it has finished, continual afterwards."""
    scope, parts = setup.scope, setup.parts
    repository = scope.repository
    if repository is None or setup.checkout is None:
        raise RunEnded("This analyzer thread names no repository.")
    client = _github(setup)
    host = parts.settings.github.host
    review = parts.settings.review
    progress = AnalysisProgress(parts.redis, parts.keys, host=host)
    current = await GuidelinesStore(parts.redis, parts.keys, host=host).latest(repository)
    authorization = await app_authorization(client, repository)
    if await progress.bootstrap_state(repository) is not BootstrapState.DONE:
        evidence = await gather_bootstrap(
            client, authorization, repository, pull_requests=review.bootstrap_pull_requests
        )
        evidence = evidence.model_copy(update={"current": current})
        found = evidence.counts()["review_comments"]
        if found < review.bootstrap_min_comments:
            await progress.set(repository, bootstrap=BootstrapState.INSUFFICIENT.value, bootstrap_comments=str(found))
            raise RunSkipped(
                f"Not enough review history in {repository} to learn from: {found} review comments by people on "
                f"{evidence.pull_requests} merged pull requests; at least {review.bootstrap_min_comments} are needed."
            )
    else:
        since = await progress.refined_until(repository)
        evidence = await gather_continual(
            client, authorization, parts.redis, parts.keys, host=host, repository=repository, since=since,
            current=current,
        )  # fmt: skip
        if not evidence.items:
            await progress.set(repository, refined_until=repr(evidence.until))
            raise RunSkipped(f"No new outcomes of findings in {repository} since the last refinement.")
    await EvidenceStore(parts.redis, parts.keys).save(scope.thread_id, evidence)
    log.info("analysis evidence gathered", thread_id=scope.thread_id, mode=evidence.mode, **evidence.counts())
    checkout = AnalysisCheckout(
        repository=setup.checkout.repository,
        path=setup.checkout.path,
        default_branch=setup.checkout.default_branch,
        instructions=setup.checkout.instructions,
        evidence=evidence,
    )
    return replace(setup, checkout=checkout)


REVIEWER_HOOKS = RoleHooks(prepare=prepare_review, inbox_at_start=True, snapshots=False, changes=False)
"""The reviewer's checkout is re-derived from the pull request on every run, so it is never
snapshotted, and its sandbox may always be replaced."""

ANALYZER_HOOKS = RoleHooks(prepare=prepare_analysis, inbox_at_start=True, snapshots=False, changes=False)
