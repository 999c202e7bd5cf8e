"""A data directory of the old layout (one database per stream) opens with the shared engine, migrated."""

from __future__ import annotations

from pathlib import Path

import pytest

import storage.rocks_migrate
from storage.config import StoreConfig
from storage.rocks import RocksStreamStore
from storage.rocks_engine import StreamStoreEngine
from tests.storage.legacy_rocks_store import LegacyRocksStreamStore

TTL = b"NATS/1.0\r\nNats-TTL: 5\r\n\r\n"
T0 = 1_700_000_000_000_000_000
CONFIG = StoreConfig(max_msgs_per_subject=3, allow_msg_ttl=True)


def _fill(store: LegacyRocksStreamStore | RocksStreamStore) -> None:
    for group in range(4):
        with store.write_group() as handle:
            for i in range(30):
                n = group * 30 + i
                store.store_msg(f"orders.{n % 9}", TTL if n % 5 == 0 else None, f"p{n}".encode(), T0 + n)
            handle.meta = f"applied-{group}".encode()
    store.remove_msg(100)
    store.skip_msgs(121, 4)


def _view(store: LegacyRocksStreamStore | RocksStreamStore) -> tuple[object, ...]:
    state = store.state(include_deleted=True)
    messages = [store.load_msg(seq) for seq in range(state.first_seq, state.last_seq + 1) if seq not in (state.deleted or ())]
    return (
        state,
        messages,
        store.subjects_state(">"),
        store.metadata,
        store.config,
        store.next_expiry_ns(),
        store.expiry_due(T0 + 10**12),
    )


def _legacy_store(root: Path, name: str, *, clean: bool) -> tuple[object, ...]:
    legacy = LegacyRocksStreamStore(root / "streams" / name, CONFIG)
    _fill(legacy)
    expected = _view(legacy)
    if clean:
        legacy.close()
    else:
        legacy._release_db()  # as a crash leaves it: no saved index
    return expected


@pytest.mark.parametrize("clean", [True, False], ids=["closed cleanly", "crashed"])
def test_an_old_layout_store_opens_with_the_same_messages(fast_dir: Path, clean: bool) -> None:
    expected = _legacy_store(fast_dir, "ORDERS-1", clean=clean)
    other = _legacy_store(fast_dir, "OTHER-2", clean=True)
    engine = StreamStoreEngine(fast_dir / "streams.rocks", legacy_root=fast_dir / "streams")
    # not registered yet, but there is an old database to move in: opening it reads
    assert engine.holds("ORDERS-1") and not engine.holds("NEW-3")
    store = RocksStreamStore(engine, "ORDERS-1")
    assert _view(store) == expected
    assert not (fast_dir / "streams" / "ORDERS-1").exists()
    # only the store opened is moved; the other waits for its own first open
    assert (fast_dir / "streams" / "OTHER-2").exists()
    store.store_msg("orders.new", None, b"after migration", T0 + 10**9)
    after = _view(store)
    store.close()
    engine.close()
    engine = StreamStoreEngine(fast_dir / "streams.rocks", legacy_root=fast_dir / "streams")
    assert _view(RocksStreamStore(engine, "ORDERS-1")) == after
    assert _view(RocksStreamStore(engine, "OTHER-2")) == other
    engine.close()


def test_a_migration_cut_off_before_the_old_directory_goes_starts_again(
    fast_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _legacy_store(fast_dir, "S-1", clean=True)
    engine = StreamStoreEngine(fast_dir / "streams.rocks", legacy_root=fast_dir / "streams")

    def crash(*_args: object) -> None:
        raise OSError("crashed before the rename")

    with monkeypatch.context() as patch:
        patch.setattr(storage.rocks_migrate.os, "rename", crash)
        with pytest.raises(OSError, match="crashed"):
            RocksStreamStore(engine, "S-1")
    assert (fast_dir / "streams" / "S-1").exists()
    assert not engine.is_open("S-1")
    store = RocksStreamStore(engine, "S-1")
    assert _view(store) == expected
    store.close()
    engine.close()


def test_a_leftover_of_a_finished_migration_is_removed(fast_dir: Path) -> None:
    _legacy_store(fast_dir, "S-1", clean=True)
    (fast_dir / "streams" / "S-1").rename(fast_dir / "streams" / "S-1.migrated")
    engine = StreamStoreEngine(fast_dir / "streams.rocks", legacy_root=fast_dir / "streams")
    store = RocksStreamStore(engine, "S-1")
    assert not (fast_dir / "streams" / "S-1.migrated").exists()
    # what was migrated before the rename is in the engine; here nothing was, so the store is new
    assert store.state().last_seq == 0
    store.close()
    engine.close()


def test_an_old_store_cut_off_mid_restore_opens_empty(fast_dir: Path) -> None:
    legacy = LegacyRocksStreamStore(fast_dir / "streams" / "S-1", CONFIG)
    _fill(legacy)
    legacy._meta_cf.put(b"restoring", b"1")
    legacy.close()
    engine = StreamStoreEngine(fast_dir / "streams.rocks", legacy_root=fast_dir / "streams")
    store = RocksStreamStore(engine, "S-1")
    assert store.state().messages == 0 and store.metadata is None
    store.close()
    engine.close()
