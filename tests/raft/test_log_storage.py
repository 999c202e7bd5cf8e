"""MemoryLogStorage: the in-memory LogStorage the simulator and unit tests run on."""

from __future__ import annotations

import pytest

from raft.log_storage import CompactedError, MemoryLogStorage, SnapshotOutOfDateError, UnavailableError
from raft.types import ConfState, Entry, HardState, Snapshot, SnapshotMetadata


def _storage_with(last: int, term: int = 1) -> MemoryLogStorage:
    storage = MemoryLogStorage(ConfState(voters=("n1", "n2", "n3")))
    storage.append([Entry(term=term, index=i, data=b"x%d" % i) for i in range(1, last + 1)])
    return storage


def test_fresh_storage_answers_term_zero_at_index_zero() -> None:
    storage = MemoryLogStorage(ConfState(voters=("n1",)))
    assert storage.first_index() == 1
    assert storage.last_index() == 0
    assert storage.term(0) == 0
    assert storage.initial_state().conf_state.voters == ("n1",)


def test_entries_range_and_errors() -> None:
    storage = _storage_with(5)
    assert [e.index for e in storage.entries(2, 5)] == [2, 3, 4]
    with pytest.raises(UnavailableError):
        storage.entries(4, 7)
    with pytest.raises(UnavailableError):
        storage.term(6)


def test_entries_respect_max_bytes_but_return_at_least_one() -> None:
    storage = _storage_with(5)
    assert len(storage.entries(1, 6, max_bytes=1)) == 1
    assert len(storage.entries(1, 6, max_bytes=2 * (16 + 2))) == 2


def test_append_replaces_conflicting_suffix() -> None:
    storage = _storage_with(5)
    storage.append([Entry(term=2, index=3), Entry(term=2, index=4)])
    assert storage.last_index() == 4
    assert [storage.term(i) for i in range(1, 5)] == [1, 1, 2, 2]


def test_append_with_gap_is_refused() -> None:
    storage = _storage_with(2)
    with pytest.raises(ValueError, match="gap"):
        storage.append([Entry(term=1, index=5)])


def test_compact_keeps_term_of_compaction_point() -> None:
    storage = _storage_with(5)
    storage.create_snapshot(3, ConfState(voters=("n1", "n2", "n3")), b"image")
    storage.compact(3)
    assert storage.first_index() == 4
    assert storage.term(3) == 1
    with pytest.raises(CompactedError):
        storage.entries(3, 5)
    with pytest.raises(CompactedError):
        storage.term(2)
    with pytest.raises(ValueError, match="beyond the snapshot"):
        storage.compact(5)


def test_apply_snapshot_replaces_log_and_rejects_older() -> None:
    storage = _storage_with(5)
    snap = Snapshot(SnapshotMetadata(10, 3, ConfState(voters=("n1", "n2"))), b"img")
    storage.apply_snapshot(snap)
    assert (storage.first_index(), storage.last_index(), storage.term(10)) == (11, 10, 3)
    state = storage.initial_state()
    assert (state.conf_index, state.conf_state.voters) == (10, ("n1", "n2"))
    with pytest.raises(SnapshotOutOfDateError):
        storage.apply_snapshot(Snapshot(SnapshotMetadata(4, 1, ConfState(voters=("n1",)))))


def test_hard_state_round_trips() -> None:
    storage = MemoryLogStorage()
    storage.set_hard_state(HardState(term=3, vote="n2", commit=7))
    assert storage.initial_state().hard_state == HardState(term=3, vote="n2", commit=7)
