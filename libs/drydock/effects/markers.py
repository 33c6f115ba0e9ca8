"""The hidden marker an external object carries so that a replay can find it."""

from __future__ import annotations


def marker(effect_id: str) -> str:
    """An HTML comment GitHub and Linear keep in a body without rendering it."""
    return f"<!-- drydock:effect:{effect_id} -->"


def marked(body: str, effect_id: str) -> str:
    """``body`` with the effect's marker on a line of its own at the end."""
    return f"{body}\n\n{marker(effect_id)}"
