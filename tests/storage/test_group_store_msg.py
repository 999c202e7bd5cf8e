"""A write group's own store_msg (the apply path's): the same writes as store_msg, only while the group is open."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from storage.errors import InvalidRequestError
from storage.model import Rollup
from storage.rocks import RocksStreamStore


def test_the_groups_store_msg_stores_what_store_msg_stores(fast_dir: Path) -> None:
    grouped = RocksStreamStore.open_alone(fast_dir / "grouped")
    plain = RocksStreamStore.open_alone(fast_dir / "plain")
    try:
        writes = [
            ("a.b", None, b"1", 1_000, None),
            ("a.c", b"NATS/1.0\r\nX: y\r\n\r\n", b"2", 2_000, None),
            ("a.b", None, b"3", 3_000, Rollup.SUBJECT),
        ]
        with grouped.write_group() as group:
            assert group.store_msg is not None
            got = [group.store_msg(*write) for write in writes]
            group.meta = b"m"
        with plain.write_group() as group:
            expected = [plain.store_msg(s, h, p, ts, rollup=r) for s, h, p, ts, r in writes]
            group.meta = b"m"
        assert got == expected
        assert grouped.state() == plain.state()
        assert [grouped.load_msg(n) for n in (2, 3)] == [plain.load_msg(n) for n in (2, 3)]
    finally:
        grouped.close()
        plain.close()
    reopened = RocksStreamStore.open_alone(fast_dir / "grouped")
    try:
        assert reopened.state().messages == 2 and reopened.metadata == b"m"
    finally:
        reopened.close()


def test_the_groups_store_msg_refuses_once_the_group_closed(fast_dir: Path) -> None:
    store = RocksStreamStore.open_alone(fast_dir / "s")
    try:
        with store.write_group() as group:
            kept = group.store_msg
        assert kept is not None
        with pytest.raises(InvalidRequestError):
            kept("a.b", None, b"late", 1_000, None)
        assert store.state().messages == 0
    finally:
        store.close()


def test_other_threads_wait_for_the_group_as_for_any_write(fast_dir: Path) -> None:
    store = RocksStreamStore.open_alone(fast_dir / "s")
    seen: list[int] = []
    try:
        with store.write_group() as group:
            assert group.store_msg is not None
            group.store_msg("a.b", None, b"1", 1_000, None)
            reader = threading.Thread(target=lambda: seen.append(store.state().messages))
            reader.start()
            reader.join(0.2)
            assert reader.is_alive()  # the group holds the store's lock: the reader waits for it
            group.store_msg("a.b", None, b"2", 2_000, None)
        reader.join(10)
        assert seen == [2]
    finally:
        store.close()
