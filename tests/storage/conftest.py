"""Fixtures: every contract test runs once per StreamStore implementation."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from storage.config import StoreConfig
from storage.interface import StreamStore
from storage.memory import MemoryStreamStore
from storage.model import memory_msg_size, msg_size
from storage.rocks import RocksStreamStore
from storage.rocks_engine import StreamStoreEngine

StoreFactory = Callable[..., StreamStore]
# RocksDB fsyncs its MANIFEST and OPTIONS files when a database is created;
# on the shared disk that is 100+ ms a store, on tmpfs about 10 ms.
_TMPFS = Path("/dev/shm")


def fast_temp_dir() -> Path:
    """A fresh directory on tmpfs when the machine has one (the caller removes it)."""
    parent = _TMPFS if _TMPFS.is_dir() else None
    return Path(tempfile.mkdtemp(prefix="jetraft-storage-", dir=parent))


@pytest.fixture
def fast_dir() -> Iterator[Path]:
    path = fast_temp_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["memory", "file"])
def make_store(request: pytest.FixtureRequest, fast_dir: Path) -> Iterator[StoreFactory]:
    """Builds stores of the parametrised kind; all are closed at teardown. File stores of one test
    share one engine, as a node's do, so a test with two stores also checks they stay apart."""
    opened: list[StreamStore] = []
    counter = iter(range(1_000_000))
    engine: StreamStoreEngine | None = None

    def factory(config: StoreConfig | None = None) -> StreamStore:
        nonlocal engine
        store: StreamStore
        if request.param == "memory":
            store = MemoryStreamStore(config)
        else:
            if engine is None:
                engine = StreamStoreEngine(fast_dir / "streams.rocks")
            store = RocksStreamStore(engine, f"store-{next(counter)}", config)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()
    if engine is not None:
        engine.close()


@pytest.fixture
def store(make_store: StoreFactory) -> StreamStore:
    return make_store()


def counted_bytes(store: StreamStore, subject: str, headers: bytes | None, payload: bytes) -> int:
    """What `store` counts towards state.bytes for a message: nats-server's memory and file stores
    count differently (subject, headers, payload and 16; or the file record's length)."""
    size = memory_msg_size if isinstance(store, MemoryStreamStore) else msg_size
    return size(len(subject.encode()), None if headers is None else len(headers), len(payload))

