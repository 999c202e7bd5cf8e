"""Fixtures: every contract test runs once per StreamStore implementation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from storage.config import StoreConfig
from storage.interface import StreamStore
from storage.memory import MemoryStreamStore
from storage.rocks import RocksStreamStore

StoreFactory = Callable[..., StreamStore]


@pytest.fixture(params=["memory", "file"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Builds stores of the parametrised kind; all are closed at teardown."""
    opened: list[StreamStore] = []
    counter = iter(range(1_000_000))

    def factory(config: StoreConfig | None = None) -> StreamStore:
        store: StreamStore
        if request.param == "memory":
            store = MemoryStreamStore(config)
        else:
            store = RocksStreamStore(tmp_path / f"store-{next(counter)}", config)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: StoreFactory) -> StreamStore:
    return make_store()


@pytest.fixture
def rocks_path(tmp_path: Path) -> Path:
    return tmp_path / "rocks"
