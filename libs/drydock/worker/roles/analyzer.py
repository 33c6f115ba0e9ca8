"""The analyzer: learns a repository's review guidelines (bootstrap, then scheduled continual
refinement; DESIGN.md section 6).

Until bootstrap has finished every run is a bootstrap; afterwards a continual run. The evidence
is gathered by the run's preparation and kept under the thread; a run with too little (or no
new) evidence is skipped without calling the model.
"""

from __future__ import annotations

import structlog

from drydock.credentials.user_tokens import app_authorization
from drydock.review.analysis import (
    AnalysisProgress,
    BootstrapState,
    EvidenceStore,
    gather_bootstrap,
    gather_continual,
)
from drydock.review.checkouts import AnalysisCheckout
from drydock.review.guidelines import GuidelinesStore
from drydock.roles import Role
from drydock.tools import save_guidelines
from drydock.worker.role_spec import Prepared, RoleSpec, RunEnded, RunSetup, RunSkipped

log = structlog.get_logger(__name__)

TOOLS: tuple[str, ...] = (save_guidelines.NAME,)
"""The analyzer's only own tool; of the framework's it keeps the reading ones (its graph)."""


async def prepare_analysis(setup: RunSetup) -> Prepared:
    """Gather the run's evidence: bootstrap until it has finished, continual afterwards."""
    scope = setup.scope
    repository = scope.repository
    if repository is None or setup.checkout is None:
        raise RunEnded("This analyzer thread names no repository.")
    client = setup.github_client()
    host = setup.host
    review = setup.review
    progress = AnalysisProgress(setup.redis, setup.keys, host=host)
    current = await GuidelinesStore(setup.redis, setup.keys, host=host).latest(repository)
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
            client, authorization, setup.redis, setup.keys, host=host, repository=repository, since=since,
            current=current,
        )  # fmt: skip
        if not evidence.items:
            await progress.set(repository, refined_until=repr(evidence.until))
            raise RunSkipped(f"No new outcomes of findings in {repository} since the last refinement.")
    await EvidenceStore(setup.redis, setup.keys).save(scope.thread_id, evidence)
    log.info("analysis evidence gathered", thread_id=scope.thread_id, mode=evidence.mode, **evidence.counts())
    checkout = AnalysisCheckout(
        repository=setup.checkout.repository,
        path=setup.checkout.path,
        default_branch=setup.checkout.default_branch,
        instructions=setup.checkout.instructions,
        evidence=evidence,
    )
    return Prepared(scope=scope, checkout=checkout)


SPEC = RoleSpec(
    role=Role.ANALYZER,
    tools=TOOLS,
    graph=Role.ANALYZER.value,
    prepare=prepare_analysis,
    inbox_at_start=True,
    snapshots=False,
    changes=False,
    pauses=False,
)
