"""The log storage the Raft core reads, and an in-memory implementation.

The core only ever *reads* storage (the `LogStorage` Protocol, the read side
of etcd's Storage); the host writes it while handling a `Ready`
(`append`, `set_hard_state`, `apply_snapshot`, `create_snapshot`, `compact`).

Index layout: entries up to `first_index() - 1` are compacted away; the term
of entry `first_index() - 1` is still known (`term()` answers it) so that an
append right after the compaction point can be checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from raft.types import ConfState, Entry, HardState, Snapshot, SnapshotMetadata


class LogStorageError(Exception):
    """Base of the errors a LogStorage raises for requests outside its range."""


class CompactedError(LogStorageError):
    """The requested index is below the first retained entry: send a snapshot instead."""


class UnavailableError(LogStorageError):
    """The requested index is beyond the last stored entry."""


class SnapshotOutOfDateError(LogStorageError):
    """A snapshot older than the one already stored was offered."""


class SnapshotTemporarilyUnavailableError(LogStorageError):
    """No snapshot can be produced right now; the core retries later."""


@dataclass(frozen=True, slots=True)
class InitialState:
    """What a restarting node recovers.

    `conf_state` is the membership as of log index `conf_index` (the latest
    snapshot); the core replays the conf-change entries stored after it.
    """

    hard_state: HardState = field(default_factory=HardState)
    conf_state: ConfState = field(default_factory=ConfState)
    conf_index: int = 0


class LogStorage(Protocol):
    def initial_state(self) -> InitialState: ...

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries [lo, hi); at least one when lo < hi, even if it exceeds max_bytes.

        Raises CompactedError if lo < first_index(), UnavailableError if hi > last_index() + 1.
        """
        ...

    def term(self, index: int) -> int:
        """Term of the entry at `index`, valid from first_index() - 1 to last_index()."""
        ...

    def first_index(self) -> int: ...

    def last_index(self) -> int: ...

    def snapshot(self) -> Snapshot:
        """The latest snapshot; may raise SnapshotTemporarilyUnavailableError."""
        ...


def entry_size(entry: Entry) -> int:
    """The size counted against max_bytes limits: the payload plus a fixed header."""
    return len(entry.data) + 16


def limit_size(entries: list[Entry], max_bytes: int | None) -> list[Entry]:
    """The longest prefix within max_bytes, but never fewer than one entry."""
    if max_bytes is None or len(entries) <= 1:
        return entries
    total = 0
    for count, entry in enumerate(entries):
        total += len(entry.data) + 16
        if total > max_bytes and count > 0:
            return entries[:count]
    return entries


class MemoryLogStorage:
    """A LogStorage in memory, with the write side a host uses. Not thread-safe."""

    def __init__(self, conf_state: ConfState | None = None) -> None:
        self._hard_state = HardState()
        self._snapshot = Snapshot(SnapshotMetadata(0, 0, conf_state or ConfState()))
        # _entries[k] has index _offset + 1 + k; _offset/_offset_term describe
        # the last compacted entry (the "dummy" whose term is still answered).
        self._offset = 0
        self._offset_term = 0
        self._entries: list[Entry] = []

    # --- read side (LogStorage) ---

    def initial_state(self) -> InitialState:
        meta = self._snapshot.metadata
        return InitialState(self._hard_state, meta.conf_state, meta.index)

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[Entry]:
        if lo <= self._offset:
            raise CompactedError(f"index {lo} is compacted (first index {self._offset + 1})")
        if hi > self.last_index() + 1:
            raise UnavailableError(f"index {hi - 1} is beyond the last index {self.last_index()}")
        if lo >= hi:
            return []
        start = lo - self._offset - 1
        return limit_size(self._entries[start : start + (hi - lo)], max_bytes)

    def term(self, index: int) -> int:
        if index < self._offset:
            raise CompactedError(f"index {index} is compacted (first index {self._offset + 1})")
        if index == self._offset:
            return self._offset_term
        if index > self.last_index():
            raise UnavailableError(f"index {index} is beyond the last index {self.last_index()}")
        return self._entries[index - self._offset - 1].term

    def first_index(self) -> int:
        return self._offset + 1

    def last_index(self) -> int:
        return self._offset + len(self._entries)

    def snapshot(self) -> Snapshot:
        return self._snapshot

    # --- write side (the host) ---

    @property
    def hard_state(self) -> HardState:
        return self._hard_state

    def set_hard_state(self, hard_state: HardState) -> None:
        self._hard_state = hard_state

    def append(self, entries: list[Entry] | tuple[Entry, ...]) -> None:
        """Append entries, replacing any stored entries from entries[0].index on."""
        if not entries:
            return
        first = entries[0].index
        if first > self.last_index() + 1:
            raise ValueError(f"gap: appending at {first} after last index {self.last_index()}")
        skip = self._offset + 1 - first
        if skip >= len(entries):
            return  # everything offered is already compacted
        if skip > 0:
            entries = entries[skip:]
            first = entries[0].index
        del self._entries[first - self._offset - 1 :]
        self._entries.extend(entries)

    def apply_snapshot(self, snapshot: Snapshot) -> None:
        """Replace the whole log with `snapshot` (a follower catching up)."""
        if snapshot.index < self._snapshot.index:
            raise SnapshotOutOfDateError(
                f"snapshot at {snapshot.index} is older than the stored one at {self._snapshot.index}"
            )
        self._snapshot = snapshot
        self._offset = snapshot.index
        self._offset_term = snapshot.term
        self._entries = []

    def create_snapshot(self, index: int, conf_state: ConfState, data: bytes) -> Snapshot:
        """Record a snapshot of the state machine as of applied entry `index`."""
        if index <= self._snapshot.index:
            raise SnapshotOutOfDateError(f"snapshot at {index} is not newer than {self._snapshot.index}")
        snapshot = Snapshot(SnapshotMetadata(index, self.term(index), conf_state), data)
        self._snapshot = snapshot
        return snapshot

    def compact(self, index: int) -> None:
        """Discard entries up to and including `index` (which a snapshot must cover)."""
        if index <= self._offset:
            return
        if index > self._snapshot.index:
            raise ValueError(f"cannot compact to {index} beyond the snapshot at {self._snapshot.index}")
        self._offset_term = self.term(index)
        del self._entries[: index - self._offset]
        self._offset = index
