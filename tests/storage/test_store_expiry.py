"""Expiry in both stores: max_age, per-message TTL (ADR-43), `never`, and what the host asks of them.

Run against MemoryStreamStore and RocksStreamStore alike (the contract fixture); the RocksDB
store's persistence of TTLs (reopen, crash, snapshot, a store written before TTLs were kept)
is checked at the end.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.config import StoreConfig
from storage.interface import StreamStore
from storage.memory import MemoryStreamStore
from storage.model import Rollup
from storage.rocks import RocksStreamStore
from storage.rocks_engine import StreamStoreEngine, prefix_end
from tests.storage.conftest import StoreFactory

SEC = 1_000_000_000
T0 = 1_000 * SEC
TTL_ON = StoreConfig(allow_msg_ttl=True)


def ttl(value: str) -> bytes:
    return f"NATS/1.0\r\nNats-TTL: {value}\r\n\r\n".encode()


def test_a_message_expires_at_its_own_ttl(make_store: StoreFactory) -> None:
    store = make_store(TTL_ON)
    store.store_msg("a", ttl("5"), b"", T0)
    store.store_msg("b", None, b"", T0 + 1)
    store.store_msg("c", ttl("2"), b"", T0 + 2)
    assert store.next_expiry_ns() == T0 + 2 + 2 * SEC
    assert store.expire(T0 + 2 * SEC + 1) == ()
    assert store.expiry_due(T0 + 10 * SEC) == (1, 3)
    assert store.state().messages == 3, "expiry_due removes nothing"
    assert store.expire(T0 + 2 * SEC + 2) == (3,)
    assert store.next_expiry_ns() == T0 + 5 * SEC
    assert store.expire(T0 + 5 * SEC) == (1,)
    assert store.next_expiry_ns() is None
    assert [m.seq for m in store.load_batch(">", 0, 10).messages] == [2]


def test_writes_expire_what_is_due_at_their_own_time(make_store: StoreFactory) -> None:
    store = make_store(TTL_ON)
    store.store_msg("a", ttl("1"), b"", T0)
    assert store.store_msg("b", None, b"", T0 + SEC - 1).removed == ()
    assert store.store_msg("b", None, b"", T0 + SEC).removed == (1,)


def test_ttls_are_ignored_until_the_stream_allows_them(make_store: StoreFactory) -> None:
    store = make_store(StoreConfig())
    store.store_msg("a", ttl("1"), b"", T0)
    store.store_msg("a", ttl("abc"), b"", T0 + 1)  # a copy from a source may carry anything
    assert store.next_expiry_ns() is None
    assert store.expire(T0 + 100 * SEC) == ()
    # turned on later: deadlines count from when each message was stored
    assert store.update_config(TTL_ON) == ()
    assert store.next_expiry_ns() == T0 + SEC
    assert store.update_config(TTL_ON, now_ns=T0 + 2 * SEC) == (1,)
    assert store.next_expiry_ns() is None


def test_never_messages_outlive_max_age(make_store: StoreFactory) -> None:
    # as nats-server: `never` holds against max_age even where the stream does not allow TTLs
    store = make_store(StoreConfig(max_age_ns=10 * SEC))
    store.store_msg("keep", ttl("never"), b"", T0)
    store.store_msg("keep", ttl("never"), b"", T0 + SEC)
    store.store_msg("go", None, b"", T0 + 2 * SEC)
    store.store_msg("keep", ttl("never"), b"", T0 + 3 * SEC)
    store.store_msg("go", None, b"", T0 + 4 * SEC)
    assert store.next_expiry_ns() == T0 + 12 * SEC
    assert store.expiry_due(T0 + 20 * SEC, limit=1) == (3,)
    assert store.expire(T0 + 13 * SEC) == (3,)
    assert store.next_expiry_ns() == T0 + 14 * SEC
    assert store.store_msg("go", None, b"", T0 + 30 * SEC).removed == (5,)
    assert store.next_expiry_ns() == T0 + 40 * SEC
    assert [m.seq for m in store.load_batch(">", 0, 10).messages] == [1, 2, 4, 6]
    store.remove_msg(6)
    assert store.next_expiry_ns() is None
    assert store.expire(T0 + 1000 * SEC) == ()


def test_limit_takes_the_lowest_sequences_of_both_kinds(make_store: StoreFactory) -> None:
    store = make_store(StoreConfig(max_age_ns=10 * SEC, allow_msg_ttl=True))
    store.store_msg("a", None, b"", T0)  # 1: by age at T0+10
    store.store_msg("a", ttl("1"), b"", T0 + 1)  # 2: by TTL at T0+1s
    store.store_msg("a", None, b"", T0 + 2)  # 3: by age
    store.store_msg("a", ttl("2"), b"", T0 + 3)  # 4: by TTL
    now = T0 + 20 * SEC
    assert store.expiry_due(now) == (1, 2, 3, 4)
    assert store.expire(now, limit=3) == (1, 2, 3)
    assert store.expire(now, limit=3) == (4,)


def test_removed_messages_leave_no_deadline_behind(make_store: StoreFactory) -> None:
    store = make_store(StoreConfig(allow_msg_ttl=True, max_msgs_per_subject=1))
    store.store_msg("k", ttl("5"), b"", T0)
    store.store_msg("k", None, b"", T0 + 1)  # replaces it through the per-subject limit
    assert store.next_expiry_ns() is None
    store.store_msg("r", ttl("5"), b"", T0 + 2)
    store.store_msg("s", ttl("6"), b"", T0 + 3)
    store.store_msg("t", None, b"", T0 + 4, rollup=Rollup.ALL)
    assert store.next_expiry_ns() is None
    store.store_msg("u", ttl("7"), b"", T0 + 5)
    store.purge()
    assert store.next_expiry_ns() is None
    store.store_msg("v", ttl("8"), b"", T0 + 6)
    store.truncate(store.state().last_seq - 1)
    assert store.next_expiry_ns() is None
    store.store_msg("w", ttl("9"), b"", T0 + 7)
    store.compact(store.state().last_seq + 1)
    assert store.next_expiry_ns() is None
    assert store.expire(T0 + 100 * SEC) == ()


def test_with_delete_markers_only_expire_removes(make_store: StoreFactory) -> None:
    # the owner places markers, so neither writes nor config changes remove anything by age
    config = StoreConfig(max_age_ns=SEC, allow_msg_ttl=True, subject_delete_marker_ttl_ns=SEC)
    store = make_store(config)
    store.store_msg("a", None, b"", T0)
    store.store_msg("b", ttl("1"), b"", T0 + 1)
    assert store.store_msg("c", None, b"", T0 + 5 * SEC).removed == ()
    assert store.update_config(config, now_ns=T0 + 6 * SEC) == ()
    assert store.next_expiry_ns() == T0 + SEC
    assert store.expire(T0 + 6 * SEC) == (1, 2, 3)


def test_a_huge_ttl_wraps_into_the_past_as_on_nats_server(make_store: StoreFactory) -> None:
    # nats-server acknowledges the message, then its expiry timer removes it at once
    store = make_store(TTL_ON)
    assert store.store_msg("a", ttl("9999999999"), b"", T0).removed == (1,)
    markers = make_store(StoreConfig(allow_msg_ttl=True, subject_delete_marker_ttl_ns=SEC))
    markers.store_msg("a", ttl("9999999999"), b"", T0)
    next_expiry = markers.next_expiry_ns()
    assert next_expiry is not None and next_expiry < T0
    assert markers.expire(T0) == (1,)


@pytest.mark.parametrize("source_kind", ["memory", "file"])
def test_snapshots_carry_ttls(make_store: StoreFactory, source_kind: str, tmp_path: Path) -> None:
    config = StoreConfig(max_age_ns=100 * SEC, allow_msg_ttl=True)
    source: StreamStore = (
        MemoryStreamStore(config) if source_kind == "memory" else RocksStreamStore.open_alone(tmp_path / "src", config)
    )
    source.store_msg("a", ttl("3"), b"", T0)
    source.store_msg("b", ttl("never"), b"", T0 + 1)
    source.store_msg("c", None, b"", T0 + 2)
    target = make_store()
    target.store_msg("stale", ttl("1"), b"", 1)
    target.restore(source.snapshot())
    source.close()
    assert target.next_expiry_ns() == T0 + 3 * SEC
    assert target.expire(T0 + 200 * SEC) == (1, 3)
    assert target.state().messages == 1


def test_rocks_keeps_ttls_across_reopen_and_crash(tmp_path: Path) -> None:
    config = StoreConfig(max_age_ns=100 * SEC, allow_msg_ttl=True)
    store = RocksStreamStore.open_alone(tmp_path / "s", config)
    store.store_msg("a", ttl("3"), b"", T0)
    store.store_msg("b", ttl("never"), b"", T0 + 1)
    store.store_msg("c", ttl("4"), b"", T0 + 2)
    store.remove_msg(3)
    store.store_msg("d", None, b"", T0 + 3)
    store.close()
    reopened = RocksStreamStore.open_alone(tmp_path / "s")
    assert reopened.next_expiry_ns() == T0 + 3 * SEC
    reopened.store_msg("e", ttl("2"), b"", T0 + 4)
    reopened._release_db()  # as if the process died: no saved index
    crashed = RocksStreamStore.open_alone(tmp_path / "s")
    assert crashed.expiry_due(T0 + 2 * SEC + 4) == (5,)
    assert crashed.expire(T0 + 200 * SEC) == (1, 4, 5)
    assert [m.subject for m in crashed.load_batch(">", 0, 10).messages] == ["b"]
    crashed.close()


def test_rocks_store_from_before_ttls_reads_them_from_its_records(tmp_path: Path) -> None:
    store = RocksStreamStore.open_alone(tmp_path / "s", TTL_ON)
    store.store_msg("a", ttl("3"), b"", T0)
    store.store_msg("b", None, b"", T0 + 1)
    prefix = store._prefix
    store.close()
    # what an older jetraft left: the records, no TTL family contents and no marker that it is kept
    engine = StreamStoreEngine(tmp_path / "s")
    for key, _ in list(engine.scan(engine.ttls_cf, prefix, prefix_end(prefix))):
        engine.ttls_cf.delete(key)
    engine.meta_cf.delete(prefix + b"ttls")
    engine.close()
    reopened = RocksStreamStore.open_alone(tmp_path / "s")
    assert reopened.next_expiry_ns() == T0 + 3 * SEC
    reopened.close()
    again = RocksStreamStore.open_alone(tmp_path / "s")
    assert again.expire(T0 + 3 * SEC) == (1,)
    again.close()
