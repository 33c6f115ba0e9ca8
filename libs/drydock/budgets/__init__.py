"""Budgets: spend and call limits per run, spend per user and per repository per day (UTC), and
the team's concurrent runs; set in the team defaults and per repository.

Checked before a run claims a sandbox (:mod:`drydock.worker.budget_gate`: a day budget reached
refuses the run, a full team defers it) and at every model call (:class:`SpendCheck`, which the step-limit
middleware asks before each call). A run stopped at a budget pauses its thread until the
thread's owner or an administrator continues it (:mod:`drydock.threads.continuation`).

A call of a model without a known price has an unknown cost, which no spend limit can be
checked against: it counts as reaching the limit (fail closed). A continue accepts it: the
continued run is checked against the known part of its cost only.
"""

from drydock.budgets.active_runs import ActiveRuns
from drydock.budgets.limits import Limits
from drydock.budgets.reached import LimitKind, Reached
from drydock.budgets.spend import Grant, SpendCheck

__all__ = ["ActiveRuns", "Grant", "LimitKind", "Limits", "Reached", "SpendCheck"]
