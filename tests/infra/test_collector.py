from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from drydock.infra.collector import YOUNG_THRESHOLD, freeze_startup_objects


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def collector() -> Iterator[None]:
    threshold = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def in_view(target: object) -> bool:
    return any(candidate is target for candidate in gc.get_objects())


@pytest.mark.usefixtures("collector")
class TestFreezeStartupObjects:
    def test_objects_alive_at_start_up_leave_the_collectors_view(self) -> None:
        startup = Node()
        assert in_view(startup)
        freeze_startup_objects()
        assert gc.get_freeze_count() > 0
        assert not in_view(startup)

    def test_objects_made_afterwards_stay_in_view_and_their_cycles_are_collected(self) -> None:
        freeze_startup_objects()
        first, second = Node(), Node()
        first.other, second.other = second, first
        assert in_view(first)
        gone = weakref.ref(first)
        del first, second
        gc.collect()
        assert gone() is None

    def test_the_young_generation_is_collected_less_often_and_the_older_ones_as_before(self) -> None:
        _, older, oldest = gc.get_threshold()
        freeze_startup_objects()
        assert gc.get_threshold() == (YOUNG_THRESHOLD, older, oldest)
