"""The index RocksStreamStore saves at close: used only when nothing was written since, else rebuilt."""

from __future__ import annotations

import struct
from hashlib import blake2b
from pathlib import Path

import pytest

from storage.config import StoreConfig
from storage.errors import MsgNotFoundError
from storage.index import StreamIndex, seqs_count, seqs_iter
from storage.index_snapshot import decode_index, encode_index
from storage.rocks import _KEY, RocksStreamStore
from storage.rocks_engine import StreamStoreEngine


def _fill(store: RocksStreamStore) -> None:
    """Messages on single- and many-message subjects, with holes in the sequences."""
    for group in range(30):
        with store.write_group():
            for i in range(100):
                n = group * 100 + i
                headers = b"NATS/1.0\r\nK: v\r\n\r\n" if n % 7 == 0 else None
                store.store_msg(f"orders.{n % 40}" if n % 3 else f"keys.k{n}", headers, b"p" * (n % 50))
    for victim in (5, 6, 700, 4097, 2999):
        store.remove_msg(victim)


def _view(store: RocksStreamStore) -> tuple[object, ...]:
    return (
        store.state(include_deleted=True),
        store.subjects_state(">"),
        store.load_last_msg("orders.*"),
        store.load_next_msg("keys.>", 100),
        store.multi_last_seqs(["orders.1", "keys.*"]),
    )


def _drop_record(engine: StreamStoreEngine, prefix: bytes, seq: int) -> None:
    """Deletes a message's record behind the store's back: an index rebuilt by scanning the records has no
    such message, the saved index still has it. (Not by replacing `_load_index`: a method of a class
    compiled by mypyc, setup.py, can be replaced on the class without the compiled callers noticing.)"""
    engine.msgs_cf.delete(prefix + _KEY.pack(seq))


def _drop_record_of_closed(path: Path, prefix: bytes, seq: int) -> None:
    engine = StreamStoreEngine(path)
    _drop_record(engine, prefix, seq)
    engine.close()


# keys.k3 and keys.k9: the only messages of their subjects, and read by no call of `_view`
_DROPPED = (4, 10)


def test_clean_close_reopens_from_the_saved_index(fast_dir: Path) -> None:
    store = RocksStreamStore.open_alone(fast_dir / "s", StoreConfig(max_msgs_per_subject=50))
    _fill(store)
    expected = _view(store)
    prefix = store._prefix
    store.close()
    _drop_record_of_closed(fast_dir / "s", prefix, _DROPPED[0])
    reopened = RocksStreamStore.open_alone(fast_dir / "s")
    assert _view(reopened) == expected
    # The reopened index keeps working: limits, removals and new subjects.
    reopened.store_msg("orders.1", None, b"new")
    reopened.store_msg("fresh.subject", None, b"new")
    expected = _view(reopened)
    assert reopened.subjects_state("orders.1")["orders.1"].msgs == 50
    reopened.close()
    _drop_record_of_closed(fast_dir / "s", prefix, _DROPPED[1])
    again = RocksStreamStore.open_alone(fast_dir / "s")
    assert _view(again) == expected
    again.close()


def test_a_store_that_was_not_closed_is_scanned(fast_dir: Path) -> None:
    store = RocksStreamStore.open_alone(fast_dir / "s")
    _fill(store)
    store.close()
    reopened = RocksStreamStore.open_alone(fast_dir / "s")
    reopened.store_msg("after.reopen", None, b"x")
    reopened.remove_msg(10)
    expected = _view(reopened)
    # As if the process died: the database goes away without close() saving the index.
    reopened._release_db()
    scanned = RocksStreamStore.open_alone(fast_dir / "s")
    assert _view(scanned) == expected
    scanned.close()


def test_writes_to_other_stores_of_the_engine_leave_the_saved_index_valid(fast_dir: Path) -> None:
    """The point of the per-store generation: in a shared database other streams write all the time."""
    engine = StreamStoreEngine(fast_dir / "streams.rocks")
    store = RocksStreamStore(engine, "A")
    neighbour = RocksStreamStore(engine, "B")
    _fill(store)
    expected = _view(store)
    store.close()
    _fill(neighbour)
    neighbour.purge()
    _drop_record(engine, store._prefix, _DROPPED[0])
    reopened = RocksStreamStore(engine, "A")
    assert _view(reopened) == expected
    reopened.close()
    neighbour.close()
    engine.close()


def _raw_write(path: Path, prefix: bytes, last: bytes) -> None:
    """A writer that bypasses the store: deletes message 42 and writes `last` as given."""
    engine = StreamStoreEngine(path)
    engine.msgs_cf.delete(prefix + _KEY.pack(42))
    engine.meta_cf.put(prefix + b"last", last)
    engine.close()


@pytest.mark.parametrize("last_format", ["old layout, no generation", "next generation"])
def test_a_write_that_moves_or_drops_the_generation_makes_the_saved_index_stale(
    fast_dir: Path, last_format: str
) -> None:
    store = RocksStreamStore.open_alone(fast_dir / "s")
    _fill(store)
    before = store.state()
    prefix, generation = store._prefix, store._generation
    store.close()
    if last_format == "next generation":
        last = struct.pack("<QqQ", before.last_seq, before.last_ts_ns, generation + 1)
    else:
        last = struct.pack("<Qq", before.last_seq, before.last_ts_ns)
    _raw_write(fast_dir / "s", prefix, last)
    reopened = RocksStreamStore.open_alone(fast_dir / "s")
    with pytest.raises(MsgNotFoundError):
        reopened.load_msg(42)
    assert reopened.state().messages == before.messages - 1
    reopened.close()


def test_blob_checks(fast_dir: Path) -> None:
    store = RocksStreamStore.open_alone(fast_dir / "s")
    _fill(store)
    blob = encode_index(store._index, 77)
    store.close()
    decoded = decode_index(blob, 77)
    assert decoded is not None
    assert decoded.subjects.keys() == store._index.subjects.keys()
    assert decode_index(blob, 78) is None
    damaged = bytearray(blob)
    damaged[len(blob) // 2] ^= 1
    assert decode_index(bytes(damaged), 77) is None
    assert decode_index(blob[:20], 77) is None
    empty = decode_index(encode_index(StreamIndex(), 3), 3)
    assert empty is not None and empty.msgs == 0 and not empty.subjects


def test_frozen_snapshot_streams_the_store_as_it_was_taken_as_often_as_asked(tmp_path: Path) -> None:
    """What a lagging follower is sent lazily: the store at the moment of the Raft snapshot, although
    the leader went on writing, purging and removing since."""
    store = RocksStreamStore.open_alone(tmp_path / "s")
    _fill(store)
    with store.write_group() as group:
        group.meta = b"applied-at-freeze"
    frozen = store.frozen_snapshot()
    expected = _view(store)
    store.store_msg("orders.late", None, b"after the freeze")
    store.remove_msg(8)
    store.purge_ex(subject="keys.>")
    with store.write_group() as group:
        group.meta = b"later"
    for _ in range(2):
        copy = RocksStreamStore.open_alone(tmp_path / f"copy-{_}")
        copy.restore(frozen())
        assert _view(copy) == expected
        assert copy.metadata == b"applied-at-freeze"
        copy.close()
    store.close()


def _encode_version_1(index: StreamIndex, stamp: int) -> bytes:
    """The blob as version 1 wrote it: every sequence of every subject (u64 each)."""
    names = list(index.subjects)
    counts = [seqs_count(index.subjects[n]) for n in names]
    seqs = [seq for name in names for seq in _subject_lists(index)[name]]
    keys, masks = index.live.chunks()
    subjects = "\n".join(names).encode()
    header = struct.pack(
        "<4sIQQqQQQQQ", b"JRIX", 1, stamp, index.last_seq, index.last_ts, index.bytes, index.msgs,
        len(names), len(keys), len(subjects),
    )  # fmt: skip
    body = header + subjects + struct.pack(f"<{len(counts)}Q", *counts) + struct.pack(f"<{len(seqs)}Q", *seqs)
    body += struct.pack(f"<{len(keys)}Q", *keys) + b"".join(m.to_bytes(512, "little") for m in masks)
    return body + blake2b(body, digest_size=8).digest()


def _subject_lists(index: StreamIndex) -> dict[str, list[int]]:
    return {
        name: list(seqs_iter(entry)) for name, entry in index.subjects.items()
    }


def test_an_index_saved_by_version_1_is_still_read(fast_dir: Path) -> None:
    store = RocksStreamStore.open_alone(fast_dir / "s")
    _fill(store)
    for _ in range(200):  # a long run on one subject, kept as runs once read
        store.store_msg("runs.one", None, b"r")
    index = store._index
    store.close()
    decoded = decode_index(_encode_version_1(index, 5), 5)
    assert decoded is not None
    assert _subject_lists(decoded) == _subject_lists(index)
    assert (decoded.msgs, decoded.bytes, decoded.last_seq) == (index.msgs, index.bytes, index.last_seq)
    again = decode_index(encode_index(decoded, 6), 6)
    assert again is not None and _subject_lists(again) == _subject_lists(index)


def test_a_long_run_on_one_subject_saves_in_constant_room() -> None:
    index = StreamIndex()
    for seq in range(1, 200_001):
        index.add(seq, "one.subject", 32)
    blob = encode_index(index, 1)
    # the live bitmap is 1 bit a message; the subject's 200,000 sequences are one run
    assert len(blob) < 200_000 // 8 + 1_000
    decoded = decode_index(blob, 1)
    assert decoded is not None and decoded.subject_state("one.subject") == index.subject_state("one.subject")
