"""Autofix: keeps the agent's own pull requests green (DESIGN.md section 8).

The path of an event: ``drydock.github.*`` → :mod:`.observations` (what the payload says) →
:class:`.controller.AutofixController` (the PR record finds the thread; local facts, then
GitHub's, through :mod:`.github`) → :mod:`.policy` (every rule, pure) → :mod:`.repairs` (the
thread's active repair, pending requests, loop count) → :mod:`.dispatch` (the repair request
in the thread's inbox and a coder wake). :mod:`.monitor` is the periodic fallback for missed
events; :mod:`.leadership` keeps one controller active. Enablement is layered
(:mod:`.enablement`, :mod:`.overrides`, :mod:`.commands`). The coder's ``report_confidence``
tool and the credential proxy's push gate read and write the repair record.
"""

from drydock.autofix.enablement import Enablements
from drydock.autofix.overrides import AutofixOverrides, Override, OverrideSource
from drydock.autofix.policy import Enablement, OverrideState
from drydock.autofix.repairs import Repair, Repairs

__all__ = [
    "AutofixOverrides",
    "Enablement",
    "Enablements",
    "Override",
    "OverrideSource",
    "OverrideState",
    "Repair",
    "Repairs",
]
