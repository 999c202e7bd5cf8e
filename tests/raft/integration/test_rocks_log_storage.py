"""RocksLogStorage: the LogStorage contract, durability across reopen, group commit, many groups."""

from __future__ import annotations

import asyncio
import random
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raft.log_storage import CompactedError, MemoryLogStorage, SnapshotOutOfDateError, UnavailableError
from raft.rocks_log_storage import DEFAULT_TAIL_BYTES, RocksLogEngine, RocksLogStorage, StorageClosedError
from raft.types import ConfState, Entry, EntryType, HardState, Snapshot, SnapshotMetadata

VOTERS = ConfState(voters=("n1", "n2", "n3"))


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[RocksLogEngine]:
    engine = RocksLogEngine(tmp_path / "raft")
    yield engine
    engine.close()


def _entries(first: int, last: int, term: int = 1) -> list[Entry]:
    return [Entry(term=term, index=i, data=b"x%d" % i) for i in range(first, last + 1)]


def test_fresh_group_starts_empty_with_its_membership(engine: RocksLogEngine) -> None:
    storage = engine.open_group("g1", conf_state=VOTERS)
    assert (storage.first_index(), storage.last_index(), storage.term(0)) == (1, 0, 0)
    assert storage.initial_state().conf_state == VOTERS


def test_entries_and_terms_survive_reopen(tmp_path: Path) -> None:
    engine = RocksLogEngine(tmp_path / "raft")
    storage = engine.open_group("g1", conf_state=VOTERS)
    storage.append(_entries(1, 3, term=1) + _entries(4, 6, term=2))
    storage.append([Entry(term=3, index=5, type=EntryType.CONF_CHANGE, data=b"cc")])
    storage.set_hard_state(HardState(term=3, vote="n2", commit=4))
    engine.persist_blocking()
    engine.close()

    engine = RocksLogEngine(tmp_path / "raft")
    try:
        storage = engine.open_group("g1")
        assert storage.last_index() == 5
        assert [storage.term(i) for i in range(0, 6)] == [0, 1, 1, 1, 2, 3]
        assert storage.entries(5, 6) == [Entry(term=3, index=5, type=EntryType.CONF_CHANGE, data=b"cc")]
        state = storage.initial_state()
        assert state.hard_state == HardState(term=3, vote="n2", commit=4)
        assert state.conf_state == VOTERS
        assert engine.groups() == ["g1"]
    finally:
        engine.close()


def test_unpersisted_writes_are_lost_on_reopen(tmp_path: Path) -> None:
    engine = RocksLogEngine(tmp_path / "raft")
    storage = engine.open_group("g1", conf_state=VOTERS)
    storage.append(_entries(1, 2))
    engine.persist_blocking()
    storage.append(_entries(3, 4))  # staged, never persisted
    engine.close()
    engine = RocksLogEngine(tmp_path / "raft")
    try:
        assert engine.open_group("g1").last_index() == 2
    finally:
        engine.close()


def test_one_persist_writes_all_groups_with_one_fsync(engine: RocksLogEngine) -> None:
    groups = [engine.open_group(f"g{i}", conf_state=VOTERS) for i in range(5)]
    for storage in groups:
        storage.append(_entries(1, 10))
        storage.set_hard_state(HardState(term=1, commit=10))
    engine.persist_blocking(sync=True)
    assert (engine.batches, engine.fsyncs) == (1, 1)
    engine.persist_blocking(sync=True)  # nothing staged: no write at all
    assert engine.batches == 1
    groups[0].set_hard_state(HardState(term=2, commit=10))
    engine.persist_blocking(sync=False)
    assert (engine.batches, engine.fsyncs) == (2, 1)


async def test_async_persist_runs_off_the_loop(engine: RocksLogEngine) -> None:
    storage = engine.open_group("g1", conf_state=VOTERS)
    storage.append(_entries(1, 1000))
    await engine.persist()
    assert engine.fsyncs == 1
    assert not engine.has_pending()


def test_a_synced_persist_lets_other_threads_run_while_the_disk_syncs(tmp_path: Path) -> None:
    """The event loop must not freeze while the writer thread waits for the disk.

    rocksdict's write(sync=True) keeps the GIL through its fsync. With a switch
    interval longer than the whole run, a thread that keeps the GIL through its
    writes starves the ticker thread for all of them; one that lets it go in the
    fsync lets the ticker in at every write.
    """
    engine = RocksLogEngine(tmp_path / "raft")
    storage = engine.open_group("g1", conf_state=VOTERS)
    ticks: list[float] = []
    started = threading.Event()
    stop = threading.Event()

    def ticker() -> None:
        started.set()
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.0001)

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    thread = threading.Thread(target=ticker)
    try:
        thread.start()
        assert started.wait(5)
        writes_start = time.perf_counter()
        for index in range(1, 51):
            storage.append(_entries(index, index))
            engine.persist_blocking(sync=True)
        writes_end = time.perf_counter()
    finally:
        stop.set()
        sys.setswitchinterval(old_interval)
        thread.join(10)
        engine.close()
    assert engine.fsyncs == 50
    during = [tick for tick in ticks if writes_start <= tick <= writes_end]
    # one tick at least per ten synced writes (a starved ticker gets none: the interval is 5 s)
    assert len(during) >= 5, (len(during), writes_end - writes_start)


def test_groups_are_isolated_and_drop_removes_one(tmp_path: Path) -> None:
    engine = RocksLogEngine(tmp_path / "raft")
    a = engine.open_group("a", conf_state=VOTERS)
    ab = engine.open_group("ab", conf_state=VOTERS)  # a prefix of no other group's keys
    a.append(_entries(1, 3))
    ab.append(_entries(1, 5, term=7))
    engine.persist_blocking()
    engine.drop_group("a")
    engine.persist_blocking()
    with pytest.raises(StorageClosedError):
        a.append(_entries(4, 4))
    engine.close()
    engine = RocksLogEngine(tmp_path / "raft")
    try:
        assert engine.groups() == ["ab"]
        ab = engine.open_group("ab")
        assert (ab.last_index(), ab.term(5)) == (5, 7)
        fresh = engine.open_group("a", conf_state=VOTERS)
        assert fresh.last_index() == 0
    finally:
        engine.close()


def test_bad_group_names_are_refused(engine: RocksLogEngine) -> None:
    with pytest.raises(ValueError, match="without NUL"):
        engine.open_group("a\x00b")
    with pytest.raises(ValueError, match="without NUL"):
        engine.open_group("")
    engine.open_group("ok")
    with pytest.raises(ValueError, match="already open"):
        engine.open_group("ok")


def test_snapshot_compaction_and_install_survive_reopen(tmp_path: Path) -> None:
    engine = RocksLogEngine(tmp_path / "raft")
    storage = engine.open_group("g1", conf_state=VOTERS)
    storage.append(_entries(1, 10, term=2))
    storage.create_snapshot(6, VOTERS, b"image-6")
    storage.compact(6)
    with pytest.raises(CompactedError):
        storage.entries(6, 8)
    with pytest.raises(SnapshotOutOfDateError):
        storage.create_snapshot(5, VOTERS, b"old")
    engine.persist_blocking()
    engine.close()

    engine = RocksLogEngine(tmp_path / "raft")
    storage = engine.open_group("g1")
    assert (storage.first_index(), storage.last_index(), storage.term(6)) == (7, 10, 2)
    assert storage.snapshot().data == b"image-6"
    assert storage.initial_state().conf_index == 6
    installed = Snapshot(SnapshotMetadata(20, 4, ConfState(voters=("n1", "n2"))), b"image-20")
    storage.apply_snapshot(installed)
    engine.persist_blocking()
    engine.close()

    engine = RocksLogEngine(tmp_path / "raft")
    try:
        storage = engine.open_group("g1")
        assert (storage.first_index(), storage.last_index(), storage.term(20)) == (21, 20, 4)
        assert storage.snapshot() == installed
        with pytest.raises(UnavailableError):
            storage.entries(21, 22)
    finally:
        engine.close()


def test_reads_beyond_the_memory_tail_come_from_disk(tmp_path: Path) -> None:
    engine = RocksLogEngine(tmp_path / "raft", tail_entries=8)
    try:
        storage = engine.open_group("g1", conf_state=VOTERS)
        for first in range(1, 200, 10):
            storage.append(_entries(first, first + 9))
            engine.persist_blocking()
        assert len(storage._tail) < 20
        assert storage.entries(1, 201) == _entries(1, 200)
        limited = storage.entries(3, 200, max_bytes=5 * 20)
        assert [e.index for e in limited] == [3, 4, 5, 6, 7]
    finally:
        engine.close()


def _check_same(rocks: RocksLogStorage, memory: MemoryLogStorage) -> None:
    assert (rocks.first_index(), rocks.last_index()) == (memory.first_index(), memory.last_index())
    for index in range(memory.first_index() - 1, memory.last_index() + 1):
        assert rocks.term(index) == memory.term(index)
    assert rocks.entries(memory.first_index(), memory.last_index() + 1) == memory.entries(
        memory.first_index(), memory.last_index() + 1
    )
    assert rocks.initial_state() == memory.initial_state()
    assert rocks.snapshot() == memory.snapshot()
    assert rocks._tail_bytes == sum(len(entry.data) for entry in rocks._tail)


@pytest.mark.parametrize("seed", range(12))
def test_random_operations_match_memory_storage_across_reopens(tmp_path: Path, seed: int) -> None:
    """A model check: the memory storage is the oracle, with a tiny tail so reads hit the disk."""
    rng = random.Random(seed)
    memory = MemoryLogStorage(VOTERS)
    engine = RocksLogEngine(tmp_path / "raft", tail_entries=4, tail_bytes=24)
    rocks = engine.open_group("g", conf_state=VOTERS)
    term = 1
    try:
        for _ in range(150):
            action = rng.random()
            if action < 0.5:
                # append, sometimes overwriting a suffix with a newer term
                first = rng.randint(
                    max(memory.first_index(), memory.last_index() - 3), memory.last_index() + 1
                )
                if first <= memory.last_index():
                    term += 1
                count = rng.randint(1, 12)
                batch = [
                    Entry(term, i, data=rng.randbytes(rng.randint(0, 40)))
                    for i in range(first, first + count)
                ]
                memory.append(batch)
                rocks.append(batch)
            elif action < 0.6 and memory.last_index() > memory.snapshot().index:
                index = rng.randint(memory.snapshot().index + 1, memory.last_index())
                data = rng.randbytes(8)
                memory.create_snapshot(index, VOTERS, data)
                rocks.create_snapshot(index, VOTERS, data)
                keep = rng.randint(0, 5)
                memory.compact(max(index - keep, 0))
                rocks.compact(max(index - keep, 0))
            elif action < 0.65:
                index = memory.last_index() + rng.randint(0, 8)
                term += 1
                snap = Snapshot(SnapshotMetadata(index, term, VOTERS), rng.randbytes(4))
                memory.apply_snapshot(snap)
                rocks.apply_snapshot(snap)
            elif action < 0.8:
                state = HardState(term=term, vote=rng.choice([None, "n1", "n2"]), commit=memory.last_index())
                memory.set_hard_state(state)
                rocks.set_hard_state(state)
            elif action < 0.95:
                engine.persist_blocking(sync=rng.random() < 0.5)
            else:
                engine.persist_blocking()
                engine.close()
                engine = RocksLogEngine(tmp_path / "raft", tail_entries=4, tail_bytes=24)
                rocks = engine.open_group("g")
            _check_same(rocks, memory)
    finally:
        engine.close()


async def test_entries_rewritten_while_a_persist_runs_are_read_back_correctly(tmp_path: Path) -> None:
    engine = RocksLogEngine(tmp_path / "raft", tail_entries=4, tail_bytes=24)
    try:
        storage = engine.open_group("g1", conf_state=VOTERS)
        storage.append(_entries(1, 40, term=1))
        writing = asyncio.create_task(engine.persist())
        await asyncio.sleep(0)  # the persist has taken the batch and is on the writer thread
        assert not engine.has_pending()
        storage.append(_entries(5, 40, term=2))  # a new leader overwrites most of it
        await writing
        assert storage.entries(1, 41) == _entries(1, 4, term=1) + _entries(5, 40, term=2)
        await engine.persist()
        assert storage.entries(1, 41) == _entries(1, 4, term=1) + _entries(5, 40, term=2)
    finally:
        engine.close()


def test_a_taken_write_belongs_to_its_taker_alone(tmp_path: Path) -> None:
    # The host takes its staged write, yields, then writes it: a persist by anyone else meanwhile must
    # neither take those entries (the host would then answer before they are on disk) nor lose them.
    engine = RocksLogEngine(tmp_path / "raft")
    storage = engine.open_group("g1", conf_state=VOTERS)
    storage.append(_entries(1, 2))
    staged = engine.take_staged()
    assert staged is not None and not engine.has_pending()
    storage.append(_entries(3, 3))
    engine.persist_blocking()  # another caller's persist: entry 3 only
    engine.write_staged(staged, sync=True)
    engine.close()
    engine = RocksLogEngine(tmp_path / "raft")
    try:
        assert engine.open_group("g1").entries(1, 4) == _entries(1, 3)
        assert engine.take_staged() is None
    finally:
        engine.close()


def _tail_bytes(storage: RocksLogStorage) -> int:
    return sum(len(entry.data) for entry in storage._tail)


def test_the_memory_tail_is_bounded_in_bytes_by_default(tmp_path: Path) -> None:
    """A stream of 8 MB messages kept every entry since the last snapshot (up to 20,000) in memory:
    the tail was bounded only by its entry count. With big entries it is bounded by bytes."""
    engine = RocksLogEngine(tmp_path / "raft")
    try:
        storage = engine.open_group("g1", conf_state=VOTERS)
        big = 2 * 1024 * 1024
        written = [Entry(term=1, index=i, data=bytes([i % 256]) * big) for i in range(1, 49)]
        for entry in written:
            storage.append([entry])
            engine.persist_blocking()
        assert _tail_bytes(storage) <= DEFAULT_TAIL_BYTES < 48 * big
        assert storage.entries(1, 49) == written  # the older ones from disk
    finally:
        engine.close()


def test_the_memory_tail_keeps_entries_not_yet_on_disk_whatever_their_size(tmp_path: Path) -> None:
    engine = RocksLogEngine(tmp_path / "raft", tail_bytes=1024)
    try:
        storage = engine.open_group("g1", conf_state=VOTERS)
        storage.append([Entry(term=1, index=i, data=b"y" * 600) for i in range(1, 5)])
        engine.persist_blocking()
        assert _tail_bytes(storage) <= 1024
        staged = [Entry(term=1, index=i, data=b"z" * 600) for i in range(5, 9)]
        storage.append(staged)  # staged, not persisted: only memory holds them
        assert storage._tail[-4:] == staged
        engine.persist_blocking()
        assert _tail_bytes(storage) <= 1024
        assert storage.entries(1, 9)[4:] == staged
    finally:
        engine.close()
