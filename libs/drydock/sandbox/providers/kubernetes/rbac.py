"""The API permissions the provider needs in the sandbox namespace, and nothing more.

The Helm chart's Role spells the same rules; a test on the rendered chart compares them with
:func:`required_rules`, so a new API call here fails that test until the Role grants it.
"""

from __future__ import annotations

from typing import Any

POD_VERBS = ("create", "delete", "get", "list", "watch")
"""create/delete: the sandbox itself; get: connect and delete; list: garbage collection;
watch: waiting for a pod to start and to be gone."""
CLAIM_VERBS = ("patch",)
"""Only with the warm pool: a claimed pod gets its thread's labels."""
SECRET_VERBS = ("create",)
"""The daemon's token Secret; it is deleted with its pod by the garbage collector (owner
reference), and never read back."""


def required_rules(*, warm_pool: bool) -> list[dict[str, Any]]:
    """The Role rules, in the order and shape the chart renders them."""
    pod_verbs = sorted(POD_VERBS + (CLAIM_VERBS if warm_pool else ()))
    return [
        {"apiGroups": [""], "resources": ["pods"], "verbs": pod_verbs},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": list(SECRET_VERBS)},
    ]
