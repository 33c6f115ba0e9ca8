"""The autofix policy: every rule that decides whether a pull request gets a repair run. Pure
functions, no I/O; the controller gathers the facts and applies the decision.

The rules run in two stages so that an event is decided from Redis alone whenever it can be:

- :func:`screen` reads only local facts (the PR record, enablement, autofix's own state):
  the pull request is closed; autofix is off for it; this head revision already got a repair
  for the same trigger; a repair run of the thread is active (the request is *coalesced*: kept
  as the thread's one pending request for the PR and decided again when the run ends); the
  loop limit is reached (autofix *stops*).
- :func:`judge` adds what only GitHub knows: the pull request moved on (the event is about an
  older head); its head commit was pushed by a person; every failing check also fails on the
  base branch; the conflict is gone; the reviewer lacks write access.

:func:`decide` is both stages in order. Enablement is layered (:func:`enablement`): a per-PR
override wins; otherwise the owner's profile flag and the repository's opt-in must both be on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    """What a repair is for. A head revision gets at most one repair per kind."""

    CI = "ci"
    """A failed check run, check suite or workflow run."""
    CONFLICT = "conflict"
    """The pull request cannot be merged into its base without conflicts."""
    REVIEW = "review"
    """A review requesting changes, or a review comment, by a person with write access."""


class Source(StrEnum):
    WEBHOOK = "webhook"
    MONITOR = "monitor"
    """The periodic fallback scan found it through the GitHub API."""
    PENDING = "pending"
    """A request coalesced while a repair was active, decided again after it ended."""


class OverrideState(StrEnum):
    ON = "on"
    OFF = "off"


class Outcome(StrEnum):
    DISPATCH = "dispatch"
    SKIP = "skip"
    COALESCE = "coalesce"
    STOP = "stop"


class Rule(StrEnum):
    """Why a decision came out as it did; recorded with every decision."""

    NOT_OPEN = "not_open"
    DISABLED = "disabled"
    ALREADY_PROCESSED = "already_processed"
    REPAIR_ACTIVE = "repair_active"
    LOOP_LIMIT = "loop_limit"
    STALE_REVISION = "stale_revision"
    PUSHED_BY_PERSON = "pushed_by_person"
    NO_FAILURE = "no_failure"
    FAILING_ON_BASE = "failing_on_base"
    NO_CONFLICT = "no_conflict"
    NOT_A_WRITER = "not_a_writer"
    REPAIR = "repair"


@dataclass(frozen=True)
class Signal:
    """Something that may need a repair: one event, or what the monitor saw."""

    kind: Kind
    head_sha: str
    source: Source
    delivery_id: str
    """The GitHub delivery, or a synthetic id for the monitor; for the log and events."""
    checks: tuple[str, ...] = ()
    """Failing checks the event named (the decision uses GitHub's current list)."""
    actor: str | None = None
    """The reviewer's login, for review signals."""
    url: str = ""


@dataclass(frozen=True)
class Enablement:
    enabled: bool
    reason: str
    user: bool
    repository: bool
    override: OverrideState | None


def enablement(*, user: bool, repository: bool, override: OverrideState | None) -> Enablement:
    """Whether autofix acts on a pull request: the override if there is one, else both flags."""
    if override is OverrideState.ON:
        return Enablement(True, "turned on for this pull request", user, repository, override)
    if override is OverrideState.OFF:
        return Enablement(False, "turned off for this pull request", user, repository, override)
    if user and repository:
        return Enablement(True, "on for the owner and the repository", user, repository, override)
    missing = [
        part
        for part, on in (("the owner's autofix setting", user), ("the repository's autofix opt-in", repository))
        if not on
    ]
    return Enablement(
        False, f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} off", user, repository, override
    )


@dataclass(frozen=True)
class LocalFacts:
    """What Redis says about the pull request and the thread that created it."""

    open: bool
    enablement: Enablement
    processed: bool
    """This head revision already got a repair for the signal's kind."""
    repair_active: bool
    """A repair of the thread is dispatched and not yet ended."""
    repairs: int
    """Repairs dispatched for this pull request so far."""
    max_repairs: int


@dataclass(frozen=True)
class RemoteFacts:
    """What GitHub says about the pull request now."""

    open: bool
    head_sha: str
    head_by_agent: bool
    """The head commit is the agent's own (its git identity), not a person's."""
    head_failures: frozenset[str]
    """Checks failing on the head revision (the latest run of each name)."""
    base_failures: frozenset[str]
    """Checks failing on the base branch's head revision."""
    mergeable: bool | None
    """False: conflicts with the base; None: GitHub has not computed it."""
    actor_can_write: bool | None = None
    """For review signals: whether the reviewer has write access."""


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    rule: Rule
    reason: str
    checks: tuple[str, ...] = ()
    """For a CI repair: the failing checks that do not fail on the base."""


def _skip(rule: Rule, reason: str) -> Decision:
    return Decision(Outcome.SKIP, rule, reason)


def screen(signal: Signal, local: LocalFacts) -> Decision | None:
    """The rules local facts decide; ``None`` when GitHub must be asked (:func:`judge`)."""
    if not local.open:
        return _skip(Rule.NOT_OPEN, "the pull request is not open")
    if not local.enablement.enabled:
        return _skip(Rule.DISABLED, f"autofix is off: {local.enablement.reason}")
    if local.processed:
        return _skip(Rule.ALREADY_PROCESSED, f"head {signal.head_sha[:12]} already got a {signal.kind.value} repair")
    if local.repair_active:
        return Decision(
            Outcome.COALESCE, Rule.REPAIR_ACTIVE, "a repair run of this thread is active; decided again when it ends"
        )
    if local.repairs >= local.max_repairs:
        return Decision(
            Outcome.STOP,
            Rule.LOOP_LIMIT,
            f"{local.repairs} repair runs were dispatched for this pull request, the most allowed",
        )
    return None


def new_failures(head: Iterable[str], base: Iterable[str]) -> tuple[str, ...]:
    """The checks failing on the head that do not fail on the base, sorted."""
    return tuple(sorted(set(head) - set(base)))


def judge(signal: Signal, remote: RemoteFacts) -> Decision:
    """The rules that need GitHub's view, for a signal :func:`screen` let through."""
    if not remote.open:
        return _skip(Rule.NOT_OPEN, "the pull request is not open")
    if remote.head_sha != signal.head_sha:
        return _skip(
            Rule.STALE_REVISION,
            f"the event is about {signal.head_sha[:12]} but the pull request is at {remote.head_sha[:12]}",
        )
    if not remote.head_by_agent:
        return _skip(Rule.PUSHED_BY_PERSON, f"head {signal.head_sha[:12]} was pushed by a person, not the agent")
    if signal.kind is Kind.CI:
        if not remote.head_failures:
            return _skip(Rule.NO_FAILURE, "no check fails on the head revision any more")
        failing = new_failures(remote.head_failures, remote.base_failures)
        if not failing:
            names = ", ".join(sorted(remote.head_failures))
            return _skip(Rule.FAILING_ON_BASE, f"every failing check ({names}) fails on the base branch too")
        return Decision(Outcome.DISPATCH, Rule.REPAIR, f"failing: {', '.join(failing)}", failing)
    if signal.kind is Kind.CONFLICT:
        if remote.mergeable is not False:
            return _skip(Rule.NO_CONFLICT, "the pull request has no merge conflict now")
        return Decision(Outcome.DISPATCH, Rule.REPAIR, "merge conflicts with the base branch")
    if not remote.actor_can_write:
        return _skip(Rule.NOT_A_WRITER, f"{signal.actor or 'the reviewer'} has no write access to the repository")
    return Decision(Outcome.DISPATCH, Rule.REPAIR, f"changes requested by {signal.actor}")


def decide(signal: Signal, local: LocalFacts, remote: RemoteFacts) -> Decision:
    """Every rule, in order: :func:`screen`, then :func:`judge`."""
    return screen(signal, local) or judge(signal, remote)
