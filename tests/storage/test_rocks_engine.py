"""The node's one database for every file stream store: stores share it without seeing each other."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.config import StoreConfig
from storage.errors import CorruptStoreError, InvalidRequestError, MsgNotFoundError, StoreClosedError
from storage.rocks import RocksStreamStore
from storage.rocks_engine import StreamStoreEngine, prefix_end


@pytest.fixture
def engine(fast_dir: Path) -> Iterator[StreamStoreEngine]:
    engine = StreamStoreEngine(fast_dir / "streams.rocks")
    yield engine
    engine.close()


def _keys_of(engine: StreamStoreEngine, prefix: bytes) -> int:
    end = prefix_end(prefix)
    return sum(
        1 for cf in (engine.msgs_cf, engine.meta_cf, engine.ttls_cf) for _ in engine.scan(cf, prefix, end)
    )


def test_stores_of_one_engine_keep_their_own_sequences_and_purges(engine: StreamStoreEngine) -> None:
    a = RocksStreamStore(engine, "A")
    b = RocksStreamStore(engine, "B")
    for i in range(5):
        a.store_msg("a.x", None, f"a{i}".encode())
    b.store_msg("b.x", None, b"b0")
    assert a.state().last_seq == 5 and b.state().last_seq == 1
    assert b.load_msg(1).payload == b"b0"
    a.purge()
    assert b.load_msg(1).payload == b"b0"
    b.remove_msg(1)
    assert a.state().messages == 0 and a.state().last_seq == 5
    a.store_msg("a.x", None, b"after")
    assert a.load_msg(6).payload == b"after"
    with pytest.raises(MsgNotFoundError):
        b.load_msg(1)
    assert sorted(engine.stores()) == ["A", "B"]
    a.close()
    b.close()


def test_a_name_opens_once_at_a_time(engine: StreamStoreEngine) -> None:
    store = RocksStreamStore(engine, "A")
    with pytest.raises(InvalidRequestError):
        RocksStreamStore(engine, "A")
    store.close()
    RocksStreamStore(engine, "A").close()


def test_holds_says_whether_opening_a_store_finds_anything(engine: StreamStoreEngine) -> None:
    # what lets a node open a new stream's store on its event loop: nothing to read
    assert not engine.holds("A")
    store = RocksStreamStore(engine, "A")
    assert engine.holds("A") and not engine.holds("B")
    store.delete()
    assert not engine.holds("A")


def test_delete_removes_every_key_of_the_store_and_only_its_own(engine: StreamStoreEngine) -> None:
    doomed = RocksStreamStore(engine, "DOOMED")
    kept = RocksStreamStore(engine, "KEPT")
    for i in range(50):
        doomed.store_msg(f"d.{i}", b"NATS/1.0\r\nNats-TTL: 1h\r\n\r\n", b"x")
        kept.store_msg(f"k.{i}", None, b"y")
    doomed_prefix = doomed._prefix
    assert _keys_of(engine, doomed_prefix) > 100
    doomed.delete()
    assert _keys_of(engine, doomed_prefix) == 0
    assert engine.stores() == ["KEPT"]
    assert kept.state().messages == 50
    # the name can come back (a stream created again): as a new, empty store under a new id
    again = RocksStreamStore(engine, "DOOMED")
    assert again._prefix != doomed_prefix
    assert again.state().last_seq == 0
    again.close()
    kept.close()


def test_engine_close_closes_the_stores_still_open(fast_dir: Path) -> None:
    engine = StreamStoreEngine(fast_dir / "streams.rocks")
    store = RocksStreamStore(engine, "A")
    store.store_msg("a", None, b"kept")
    engine.close()
    assert store.closed
    with pytest.raises(StoreClosedError):
        store.store_msg("a", None, b"refused")
    reopened_engine = StreamStoreEngine(fast_dir / "streams.rocks")
    reopened = RocksStreamStore(reopened_engine, "A")
    assert reopened.load_msg(1).payload == b"kept"
    reopened_engine.close()


def test_concurrent_synced_groups_of_two_stores_all_land(fast_dir: Path) -> None:
    """Writes and WAL fsyncs of two stores from two threads at once, as replicas applying through
    asyncio.to_thread do: nothing lost, nothing mixed up, and the scan after a crash agrees."""
    engine = StreamStoreEngine(fast_dir / "streams.rocks")
    stores = {name: RocksStreamStore(engine, name) for name in ("A", "B")}
    groups, per_group = 40, 25
    failures: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            store = stores[name]
            for group in range(groups):
                with store.write_group(sync=True) as handle:
                    for i in range(per_group):
                        store.store_msg(f"{name}.{i % 7}", None, f"{name}-{group}-{i}".encode())
                    handle.meta = str(group).encode()
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(name,)) for name in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures and not any(t.is_alive() for t in threads)
    # as a crash leaves it: no store saves its index
    for store in stores.values():
        store._release_db()
    engine.abandon()
    engine = StreamStoreEngine(fast_dir / "streams.rocks")
    for name in stores:
        store = RocksStreamStore(engine, name)
        assert store.state().messages == groups * per_group
        assert store.metadata == str(groups - 1).encode()
        assert store.load_msg(groups * per_group).payload == f"{name}-{groups - 1}-{per_group - 1}".encode()
        assert set(store.subjects_state(">")) == {f"{name}.{i}" for i in range(7)}
    engine.close()


def test_a_database_of_the_old_layout_is_refused_not_misread(fast_dir: Path) -> None:
    from tests.storage.legacy_rocks_store import LegacyRocksStreamStore

    legacy = LegacyRocksStreamStore(fast_dir / "old")
    legacy.store_msg("a", None, b"old")
    legacy.close()
    with pytest.raises(CorruptStoreError, match="old layout"):
        StreamStoreEngine(fast_dir / "old")


@pytest.mark.parametrize(
    "config", [None, StoreConfig(), StoreConfig(max_msgs=5, max_age_ns=10**9, allow_msg_ttl=True)]
)
def test_a_new_store_opens_as_it_reopens(engine: StreamStoreEngine, config: StoreConfig | None) -> None:
    # a store new to the engine writes its first records with its registration and reads nothing back:
    # what it holds and answers must be what opening it again from disk finds
    store = RocksStreamStore(engine, "NEW", config)
    first = (store.config, store.state(), store.metadata, store._ttl.active)
    prefix = store._prefix
    meta_keys = [key[len(prefix) :] for key, _ in engine.scan(engine.meta_cf, prefix, prefix_end(prefix))]
    assert sorted(meta_keys) == [b"config", b"format", b"ttls"]
    store.close()
    again = RocksStreamStore(engine, "NEW")
    assert (again.config, again.state(), again.metadata, again._ttl.active) == first
    assert again.config == (config if config is not None else StoreConfig())
    again.store_msg("a", None, b"1")
    assert again.state().last_seq == 1
    again.close()
