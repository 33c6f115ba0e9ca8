"""The analyzer's system prompt. The procedures themselves are skills (``/skills/``), read on
demand; the prompt says which one this run follows and where the evidence is."""

from __future__ import annotations

from drydock.review.checkouts import AnalysisCheckout
from drydock.threads.checkout import Checkout
from drydock.threads.scope import ThreadScope

EVIDENCE_ROUTE = "/analysis/"
EVIDENCE_FILE = "/analysis/evidence.json"

_ROLE = """\
You are Drydock's review analyzer. You learn the review guidelines of one repository, which \
Drydock's reviewer then applies. You read; your only action is `save_guidelines`. Your \
procedures are skills under /skills/: read the skill's SKILL.md before you start and follow it."""


def analyzer_prompt(scope: ThreadScope, checkout: Checkout | None) -> str:
    """The system prompt of one analyzer run."""
    if not isinstance(checkout, AnalysisCheckout) or checkout.evidence is None:
        return _ROLE + "\n\nThis run has no evidence to learn from. Say so in one sentence and stop."
    evidence = checkout.evidence
    skill = f"/skills/analyzer-{evidence.mode}/SKILL.md"
    counts = evidence.counts()
    parts = [
        _ROLE,
        f"This run is a **{evidence.mode}** run for `{evidence.repository}`: follow `{skill}`. The evidence is "
        f"`{EVIDENCE_FILE}` ({counts['review_comments']} review comments, {counts['findings']} finding outcomes, "
        f"from {counts['pull_requests']} pull requests). The repository's default branch is checked out at "
        f"`{checkout.path}` if you need to see the code a comment refers to.",
    ]
    if evidence.current is not None:
        parts.append(
            f"The guidelines in force are version {evidence.current.version}; the evidence file holds them under "
            "`current`."
        )
    return "\n\n".join(parts)
