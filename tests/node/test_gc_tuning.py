"""The node's garbage collector settings (cluster/node/command.py): young collections every
YOUNG_COLLECTION_THRESHOLD allocations, and the start-up's objects frozen out of full collections."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from cluster.node.command import YOUNG_COLLECTION_THRESHOLD, freeze_startup_objects, tune_garbage_collector


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_young_collections_are_less_frequent(restored_collector: None) -> None:
    _, middle, old = gc.get_threshold()
    tune_garbage_collector()
    assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, middle, old)
    assert YOUNG_COLLECTION_THRESHOLD > 700  # Python's default


def test_startup_objects_leave_the_collected_generations(restored_collector: None) -> None:
    gc.unfreeze()
    alive = [[index] for index in range(1000)]  # container objects a start-up made and keeps
    freeze_startup_objects()
    assert gc.get_freeze_count() >= len(alive)
    assert not any(gc.is_tracked(obj) and _in_collected_generations(obj) for obj in alive[:10])


def test_garbage_of_the_startup_is_collected_before_freezing(restored_collector: None) -> None:
    gc.unfreeze()
    cycle: list[object] = []
    cycle.append(cycle)
    ref_count_only = id(cycle)
    del cycle  # unreachable, held only by its own cycle
    freeze_startup_objects()
    assert not any(id(obj) == ref_count_only for obj in gc.get_objects())


def _in_collected_generations(obj: object) -> bool:
    return any(candidate is obj for generation in range(3) for candidate in gc.get_objects(generation))
