"""The written rules of AGENTS.md that a reader could miss, checked on the source.

- A caught error in a log line or event is named with ``drydock.errors.describe``: ``str`` of
  httpx's and asyncio's timeouts is empty.
- A loop that runs until cancelled (``while True`` with no ``break``, ``return`` or ``raise``)
  pauses with ``drydock.infra.cancellation.pause``, not ``asyncio.sleep``: on Python 3.11 a
  library can swallow the cancellation and the loop must still end.
- A test waits until a deadline (``tests.waiting.eventually``), never for a count of tries: a
  loop over ``range`` that sleeps and breaks out passes on a quiet machine and fails on CI's.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("libs/drydock/**/*.py"), *ROOT.glob("services/**/*.py")])
TESTS = sorted([*ROOT.glob("tests/**/*.py"), *ROOT.glob("integration/**/*.py")])
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _parsed(paths: Iterable[Path] = SOURCES) -> Iterator[tuple[str, ast.Module]]:
    for path in paths:
        yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), filename=str(path))


def _same_scope(nodes: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Every node under ``nodes`` that runs in their scope (nested functions and classes left out)."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _stringified_error(value: ast.expr) -> bool:
    if isinstance(value, ast.BoolOp):
        return _stringified_error(value.values[0])
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "str"


def _undescribed_errors(trees: Iterable[tuple[str, ast.Module]]) -> list[str]:
    return [
        f"{path}:{keyword.value.lineno}"
        for path, tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for keyword in node.keywords
        if keyword.arg == "error" and _stringified_error(keyword.value)
    ]


def _sleeps_in_endless_loops(trees: Iterable[tuple[str, ast.Module]]) -> list[str]:
    offenders = []
    for path, tree in trees:
        for loop in ast.walk(tree):
            if not (isinstance(loop, ast.While) and isinstance(loop.test, ast.Constant) and loop.test.value is True):
                continue
            body = list(_same_scope(loop.body))
            if any(isinstance(node, ast.Break | ast.Return | ast.Raise) for node in body):
                continue
            offenders += [
                f"{path}:{node.lineno}"
                for node in body
                if isinstance(node, ast.Await)
                and isinstance(node.value, ast.Call)
                and ast.unparse(node.value.func) == "asyncio.sleep"
            ]
    return offenders


def _waits_counted_in_tries(trees: Iterable[tuple[str, ast.Module]]) -> list[str]:
    offenders = []
    for path, tree in trees:
        for loop in ast.walk(tree):
            if not (
                isinstance(loop, ast.For | ast.AsyncFor)
                and isinstance(loop.iter, ast.Call)
                and ast.unparse(loop.iter.func) == "range"
            ):
                continue
            body = list(_same_scope(loop.body))
            leaves = any(isinstance(node, ast.Break | ast.Return) for node in body) or loop.orelse
            sleeps = any(isinstance(node, ast.Call) and ast.unparse(node.func).endswith(".sleep") for node in body)
            if leaves and sleeps:
                offenders.append(f"{path}:{loop.lineno}")
    return offenders


def test_errors_are_named_with_describe() -> None:
    offenders = _undescribed_errors(_parsed())
    assert offenders == [], f"name caught errors with drydock.errors.describe(error), not str(error): {offenders}"


def test_loops_that_run_until_cancelled_pause() -> None:
    offenders = _sleeps_in_endless_loops(_parsed())
    assert offenders == [], f"loops that run until cancelled pause with cancellation.pause: {offenders}"


def test_tests_wait_for_a_deadline_not_a_count() -> None:
    offenders = _waits_counted_in_tries(_parsed(TESTS))
    assert offenders == [], f"wait with tests.waiting.eventually, bounded by time: {offenders}"


OFFENCE = """
async def renew():
    while True:
        await asyncio.sleep(1)
        try:
            await lease.renew()
        except RedisError as error:
            log.warning("renewal failed", error=str(error) or type(error).__name__)


async def bounded():
    while True:
        if await ready():
            return
        await asyncio.sleep(0.1)


async def counted():
    for _ in range(100):
        if await ready():
            break
        await asyncio.sleep(0.05)
"""


def test_the_checks_see_an_offence() -> None:
    trees = [("offence.py", ast.parse(OFFENCE))]
    assert _undescribed_errors(trees) == ["offence.py:8"]
    assert _sleeps_in_endless_loops(trees) == ["offence.py:4"]
    assert _waits_counted_in_tries(trees) == ["offence.py:19"]
