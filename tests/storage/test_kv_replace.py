"""A history-1 store (a KV bucket) replaces a key's message without reading the old record back."""

from __future__ import annotations

from pathlib import Path

from storage.config import DiscardPolicy, StoreConfig
from storage.rocks import RocksStreamStore

KV = StoreConfig(max_msgs_per_subject=1, discard=DiscardPolicy.NEW)


class _CountingFamily:
    """A column family that counts its point reads (the store reads records through `get`)."""

    def __init__(self, family: object) -> None:
        self._family = family
        self.gets = 0

    def get(self, key: object) -> object:
        self.gets += 1
        return self._family.get(key)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._family, name)


def _counting(store: RocksStreamStore) -> _CountingFamily:
    family = _CountingFamily(store._msgs_cf)
    store._msgs_cf = family  # type: ignore[assignment]
    return family


def test_replacing_a_key_reads_no_record_and_keeps_the_byte_count(fast_dir: Path) -> None:
    store = RocksStreamStore.open_alone(fast_dir / "kv", KV)
    try:
        for key in range(20):
            store.store_msg(f"$KV.b.k{key}", None, b"v" * key)
        family = _counting(store)
        # a key replaced by a message of another size, with and without headers, inside a group too
        store.store_msg("$KV.b.k3", b"NATS/1.0\r\nA: b\r\n\r\n", b"longer value")
        with store.write_group():
            store.store_msg("$KV.b.k7", None, b"")
            store.store_msg("$KV.b.k7", None, b"again")
        assert family.gets == 0
        expected = sum(len(m.subject) + len(m.headers or b"") + len(m.payload) for m in _all(store))
        state = store.state()
        assert state.messages == 20
        # each record is its fields plus 30 bytes (and 4 more with headers), as msg_size counts it
        assert state.bytes == expected + 30 * 20 + 4
    finally:
        store.close()


def test_a_key_whose_size_the_saved_index_lost_is_read_once(fast_dir: Path) -> None:
    path = fast_dir / "kv"
    store = RocksStreamStore.open_alone(path, KV)
    store.store_msg("$KV.b.a", None, b"12345")
    store.store_msg("$KV.b.b", None, b"1")
    store.close()
    store = RocksStreamStore.open_alone(path)
    try:
        before = store.state().bytes
        family = _counting(store)
        store.store_msg("$KV.b.a", None, b"123")
        assert family.gets == 1  # the saved index has no sizes: the old record is read
        store.store_msg("$KV.b.a", None, b"1234567")
        assert family.gets == 1
        assert store.state().bytes == before - 5 + 7
        assert [m.seq for m in _all(store)] == [2, 4]
    finally:
        store.close()


def _all(store: RocksStreamStore) -> list:
    return list(store.load_batch(">", 1, 100).messages)


def test_a_key_shrunk_back_to_one_message_reads_its_record_once(fast_dir: Path) -> None:
    store = RocksStreamStore.open_alone(fast_dir / "kv", StoreConfig(max_msgs_per_subject=2))
    try:
        store.store_msg("$KV.b.a", None, b"1")
        store.store_msg("$KV.b.a", None, b"22")
        store.update_config(KV)  # history 2 -> 1: the oldest goes, the survivor's size is not in the index
        before = store.state().bytes
        family = _counting(store)
        store.store_msg("$KV.b.a", None, b"333")
        store.store_msg("$KV.b.a", None, b"4444")
        assert family.gets == 1
        assert store.state().bytes == before - 2 + 4
        assert [m.seq for m in _all(store)] == [4]
    finally:
        store.close()
