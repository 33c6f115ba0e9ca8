"""What the reviewer's and the analyzer's preparation hand their graphs: the checkout, plus the
pull request under review or the evidence to learn from."""

from __future__ import annotations

from dataclasses import dataclass

from drydock.review.analysis import Evidence
from drydock.review.guidelines import GuidelinesVersion
from drydock.review.target import ReviewTarget
from drydock.threads.checkout import Checkout


@dataclass(frozen=True)
class ReviewCheckout(Checkout):
    """The repository checked out (detached) at the pull request's head."""

    target: ReviewTarget | None = None
    guidelines: GuidelinesVersion | None = None
    """The repository's current (newest approved) review guidelines."""


@dataclass(frozen=True)
class AnalysisCheckout(Checkout):
    """The repository at its default branch, and what this analyzer run learns from."""

    evidence: Evidence | None = None
