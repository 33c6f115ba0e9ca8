"""Stores own their keys (AGENTS.md): a key of :class:`drydock.infra.redis.Keys` listed here is
spelled only in the modules of the store that owns it, so that no other module reads or writes
its hash behind the store's back (and parses its fields a second way)."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

OWNERS: dict[str, frozenset[str]] = {
    "thread": frozenset({"libs/drydock/threads/metadata.py"}),
    # The creation and state scripts keep a thread's index entry in step with its hash.
    "thread_facets": frozenset({"libs/drydock/threads/index.py", "libs/drydock/threads/metadata.py"}),
    "threads_by": frozenset({"libs/drydock/threads/index.py", "libs/drydock/threads/metadata.py"}),
    "thread_short_id": frozenset({"libs/drydock/threads/pr_records.py"}),
}
"""Each owned key (a ``Keys`` method) and the only modules that may call it."""


def _parsed() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted([*ROOT.glob("libs/drydock/**/*.py"), *ROOT.glob("services/**/*.py")]):
        yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), filename=str(path))


def _keys_calls(trees: Iterable[tuple[str, ast.Module]]) -> list[tuple[str, str, int]]:
    """Every ``<…keys>.<name>(…)`` call: the key's name, the module and the line."""
    return [
        (node.func.attr, path, node.lineno)
        for path, tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and ast.unparse(node.func.value).rsplit(".", 1)[-1] in {"keys", "_keys"}
    ]


def _trespasses(trees: Iterable[tuple[str, ast.Module]]) -> list[str]:
    return [
        f"{path}:{line} ({name})"
        for name, path, line in _keys_calls(trees)
        if name in OWNERS and path not in OWNERS[name]
    ]


def test_only_the_owning_store_touches_its_keys() -> None:
    offenders = _trespasses(_parsed())
    assert offenders == [], f"read and write these keys through their store: {offenders}"


def test_every_owned_key_is_still_used_by_its_owner() -> None:
    used = {(name, path) for name, path, _ in _keys_calls(_parsed())}
    stale = [name for name, owners in OWNERS.items() if not any((name, path) in used for path in owners)]
    assert stale == [], f"OWNERS names keys their stores no longer use: {stale}"


OFFENCE = """
async def summary(redis, keys, runtime, thread_id):
    fields = await redis.hgetall(keys.thread(thread_id))
    async with redis.pipeline() as pipe:
        pipe.hgetall(runtime.keys.thread(thread_id))
    return await redis.zcard(self._keys.threads_by("state", "idle"))
"""


def test_the_check_sees_an_offence() -> None:
    trees = [("services/dashboard/offence.py", ast.parse(OFFENCE))]
    assert _trespasses(trees) == [
        "services/dashboard/offence.py:3 (thread)",
        "services/dashboard/offence.py:5 (thread)",
        "services/dashboard/offence.py:6 (threads_by)",
    ]
