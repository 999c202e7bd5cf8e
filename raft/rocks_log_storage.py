"""Raft logs on RocksDB: every group of a node in one database, written with group commit.

`RocksLogEngine` owns the node's database. `open_group()` gives a
`RocksLogStorage` per group that satisfies the same `LogStorage` Protocol
(and has the same write methods) as `MemoryLogStorage`. A write method
changes the group's in-memory view at once and stages the change in the
engine's pending `WriteBatch`; `persist()` writes whatever every group staged
as one batch, with one fsync, on a writer thread so the event loop keeps
running. That is the group commit: one fsync covers every entry and hard
state all groups produced in one driver iteration.

Key layout (group names never contain NUL):

    G<group>                      registry: the group exists (value: options)
    r<group>\\0 e <index:8 BE>    entry: term:8 BE, type:1, data
    r<group>\\0 h                 hard state: term:8, commit:8, vote (utf-8)
    r<group>\\0 o                 compaction point: index:8, term:8
    r<group>\\0 m                 snapshot metadata (JSON)
    r<group>\\0 d                 snapshot data

Reads of recent entries come from an in-memory tail (the leader reads what it
just appended to send it to followers); older ones from RocksDB.
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import struct
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import orjson
from rocksdict import DBRecoveryMode, Options, Rdict, ReadOptions, WriteBatch, WriteOptions

from raft.log_storage import (
    CompactedError,
    InitialState,
    SnapshotOutOfDateError,
    UnavailableError,
    entry_size,
    limit_size,
)
from raft.sync_point import record_sync_point, recording
from raft.types import ConfState, Entry, EntryType, HardState, Snapshot, SnapshotMetadata

_ENTRY_HEADER = struct.Struct(">QB")
_INDEX = struct.Struct(">Q")
_PAIR = struct.Struct(">QQ")
_MAX_GROUP_NAME_BYTES = 1024
# Entries kept in memory behind the last index; older reads go to RocksDB.
DEFAULT_TAIL_ENTRIES = 65_536
# ... and at most this many bytes of them (once on disk): with 8 MB messages a count alone let a stream
# hold every entry since its last snapshot (up to 20,000) in memory.
DEFAULT_TAIL_BYTES = 32 * 1024 * 1024


# A taken batch, and per storage (last index, rewrite count) to trim its in-memory tail once written.
StagedWrite = tuple[WriteBatch, list[tuple["RocksLogStorage", int, int]]]


class StorageClosedError(RuntimeError):
    """The engine was closed; the group cannot be read or written any more."""


class RaftLogDamagedError(RuntimeError):
    """The Raft-log database is damaged: a checksum failed, a write-ahead log was cut, entries are missing."""


def is_torn_tail(exc: Exception) -> bool:
    """RocksDB's refusal of a write-ahead log that ends inside a record (absolute consistency).

    A kill -9 in the middle of a large write leaves one (the process dies between two of the write's
    system calls), and so does a log cut short by damage: from the file alone the two look the same. The
    engine then opens with the incomplete record dropped and says so (`tail_was_torn`): what follows the
    cut, if it was a cut, may have been acknowledged, so the node recovers as if it had lost it."""
    text = str(exc)
    return text.startswith("Corruption") and (
        "truncated record body" in text or "encountering EOF" in text or "truncated header" in text
    )


def _damage(exc: Exception, where: str) -> Exception:
    """rocksdict raises a bare Exception carrying RocksDB's status: a Corruption becomes RaftLogDamagedError."""
    text = str(exc)
    if text.startswith("Corruption") or "checksum mismatch" in text:
        return RaftLogDamagedError(f"raft log damaged ({where}): {text}")
    return exc


def _group_prefix(group: str) -> bytes:
    return b"r" + group.encode() + b"\x00"


def _validate_group_name(group: str) -> None:
    encoded = group.encode()
    if not encoded or b"\x00" in encoded or len(encoded) > _MAX_GROUP_NAME_BYTES:
        raise ValueError(f"group name {group!r} must be 1..{_MAX_GROUP_NAME_BYTES} bytes without NUL")


def _encode_entry(entry: Entry) -> bytes:
    return _ENTRY_HEADER.pack(entry.term, entry.type) + entry.data


def _decode_entry(index: int, value: bytes) -> Entry:
    term, entry_type = _ENTRY_HEADER.unpack_from(value)
    return Entry(term, index, EntryType(entry_type), value[_ENTRY_HEADER.size :])


def _encode_hard_state(state: HardState) -> bytes:
    return _PAIR.pack(state.term, state.commit) + (state.vote or "").encode()


def _decode_hard_state(value: bytes) -> HardState:
    term, commit = _PAIR.unpack_from(value)
    vote = value[_PAIR.size :].decode()
    return HardState(term=term, vote=vote or None, commit=commit)


def _encode_snapshot_metadata(meta: SnapshotMetadata) -> bytes:
    return orjson.dumps(
        {
            "index": meta.index,
            "term": meta.term,
            "voters": list(meta.conf_state.voters),
            "learners": list(meta.conf_state.learners),
        }
    )


def _decode_snapshot_metadata(value: bytes) -> SnapshotMetadata:
    data = orjson.loads(value)
    return SnapshotMetadata(
        data["index"], data["term"], ConfState(tuple(data["voters"]), tuple(data["learners"]))
    )


class RocksLogEngine:
    """The node's Raft-log database: opens groups, batches their writes, fsyncs once per persist."""

    def __init__(
        self, path: str | Path, *, tail_entries: int = DEFAULT_TAIL_ENTRIES, tail_bytes: int = DEFAULT_TAIL_BYTES
    ) -> None:
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        # RocksDB's default WAL recovery stops at the first bad record and opens without every later write,
        # synced ones included: entries acknowledged, a vote granted, silently gone. Refuse instead (the
        # node then recovers from its peers, raft/recovery.py). A kill -9 never leaves a partial record.
        options.set_wal_recovery_mode(DBRecoveryMode.absolute_consistency())
        options.set_paranoid_checks(True)
        # The WAL is what makes a write durable; RocksDB's own background flushes
        # and compactions do not need to be fsynced for that.
        # Whether the write-ahead log ended in an incomplete record, dropped at open (see `open_rocks`).
        self.tail_was_torn = False
        try:
            self._db = Rdict(str(path), options)
        except Exception as exc:
            if not is_torn_tail(exc):
                raise _damage(exc, f"opening {path}") from exc
            options.set_wal_recovery_mode(DBRecoveryMode.tolerate_corrupted_tail_records())
            try:
                self._db = Rdict(str(path), options)
            except Exception as again:
                raise _damage(again, f"opening {path}") from again
            self.tail_was_torn = True
        self._path = Path(path)
        self._tail_entries = tail_entries
        self._tail_bytes = tail_bytes
        self._pending = WriteBatch(raw_mode=True)
        # Groups that staged entries into _pending: their in-memory tails may be
        # trimmed once that batch is on disk, not before.
        self._dirty: set[RocksLogStorage] = set()
        self._groups: dict[str, RocksLogStorage] = {}
        self._nosync_options = WriteOptions()
        self._nosync_options.sync = False
        # One writer thread keeps batches in the order they were staged.
        self._writer = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="raft-log-writer"
        )
        self._write_lock = threading.Lock()
        self._closed = False
        # what recovery found is as durable as the files it came from: the first sync point is the open
        self._record_sync_points = recording()
        if self._record_sync_points:
            record_sync_point(self._path)
        self.fsyncs = 0
        self.batches = 0

    @property
    def path(self) -> Path:
        return self._path

    # --- groups ---

    def groups(self) -> list[str]:
        """Names of the groups stored in this database."""
        return [key[1:].decode() for key, _ in self._scan(b"G", b"H")]

    def open_group(self, group: str, *, conf_state: ConfState | None = None) -> RocksLogStorage:
        """The storage of `group`, recovered from disk; `conf_state` seeds a group new to this node.

        A group created here is registered in the pending batch: it is durable
        after the next `persist()`.
        """
        self._check_open()
        _validate_group_name(group)
        if group in self._groups:
            raise ValueError(f"group {group!r} is already open")
        registry_key = b"G" + group.encode()
        storage = RocksLogStorage(self, group, self._tail_entries, self._tail_bytes)
        if self._db.get(registry_key) is None:
            storage._initialise(conf_state or ConfState())
            self._pending.put(registry_key, b"")
        else:
            storage._recover()
        self._groups[group] = storage
        return storage

    def close_group(self, group: str) -> None:
        """Forget the open handle (the data stays)."""
        self._groups.pop(group, None)

    def drop_group(self, group: str) -> None:
        """Delete everything stored for `group` (staged; durable after the next persist)."""
        self._check_open()
        storage = self._groups.pop(group, None)
        if storage is not None:
            storage._dropped = True
        prefix = _group_prefix(group)
        self._pending.delete_range(prefix, prefix[:-1] + b"\x01")
        self._pending.delete(b"G" + group.encode())

    # --- writing ---

    def stage(self) -> WriteBatch:
        """The batch the next persist() writes; groups add to it."""
        self._check_open()
        return self._pending

    def has_pending(self) -> bool:
        return not self._pending.is_empty()

    def pending_bytes(self) -> int:
        return self._pending.size_in_bytes()

    def persist_blocking(self, sync: bool = True) -> None:
        """Write everything staged so far as one batch; fsync the WAL when `sync`."""
        self.write_staged(self.take_staged(), sync)

    def take_staged(self) -> StagedWrite | None:
        """Everything staged so far, as one write to make with `write_staged`; later staging goes into the
        next. Lets a caller yield between the two without another persist taking its entries."""
        self._check_open()
        return self._take_pending()

    def write_staged(self, staged: StagedWrite | None, sync: bool = True) -> None:
        if staged is not None:
            batch, written = staged
            self._write(batch, sync)
            self._written(written)

    async def persist(self, sync: bool = True) -> None:
        """persist_blocking() on the writer thread, so the loop keeps serving other groups."""
        self._check_open()
        taken = self._take_pending()
        if taken is None:
            return
        batch, written = taken
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._writer, self._write, batch, sync)
        self._written(written)

    def _take_pending(self) -> StagedWrite | None:
        if self._pending.is_empty():
            return None
        batch = self._pending
        # Writes staged while this batch is on disk go into the next one.
        self._pending = WriteBatch(raw_mode=True)
        written = [(storage, storage._last, storage._rewrites) for storage in self._dirty]
        self._dirty = set()
        return batch, written

    @staticmethod
    def _written(written: list[tuple[RocksLogStorage, int, int]]) -> None:
        for storage, last, rewrites in written:
            # After a truncation the indices up to `last` may hold entries that
            # are not on disk yet; the next persist trims instead.
            if storage._rewrites == rewrites:
                storage._trim_tail(last)

    def _write(self, batch: WriteBatch, sync: bool) -> None:
        with self._write_lock:
            if self._closed:
                raise StorageClosedError("raft log engine is closed")
            # write(sync=True) holds the GIL through its fsync (rocksdict), stalling the event loop for the
            # whole disk wait; flush_wal(True) syncs the same WAL with the GIL released
            self._db.write(batch, self._nosync_options)
            self.batches += 1
            if sync:
                self._db.flush_wal(True)
                self.fsyncs += 1
                if self._record_sync_points:
                    record_sync_point(self._path)

    # --- reading (used by the groups) ---

    def _get(self, key: bytes) -> bytes | None:
        self._check_open()
        try:
            return self._db.get(key)
        except Exception as exc:
            raise _damage(exc, "reading") from exc

    def _scan(self, start: bytes, end: bytes) -> Iterable[tuple[bytes, bytes]]:
        self._check_open()
        options = ReadOptions()
        options.set_iterate_upper_bound(end)
        it = self._db.iter(options)
        it.seek(start)
        while it.valid():
            key = it.key()
            if key >= end:
                return
            yield key, it.value()
            it.next()
        # An iterator that meets a damaged block stops as if the data ended there: only its status tells.
        try:
            it.status()
        except Exception as exc:
            raise _damage(exc, "scanning") from exc

    def verify(self) -> dict[str, int]:
        """Recover every stored group as opening it would, without keeping it: raises RaftLogDamagedError if
        any block fails its checksum or a group's log has a hole or ends before its commit index. Returns
        each group's last index (its snapshot's when the log holds nothing after it)."""
        last_indexes: dict[str, int] = {}
        for group in self.groups():
            if group in self._groups:
                continue
            storage = RocksLogStorage(self, group, 1)
            storage._recover()
            if storage._hard_state.commit > storage._last:
                # Entries it had durably written (its commit index says so) are gone: a log cut short.
                raise RaftLogDamagedError(
                    f"raft log of group {group!r} ends at {storage._last}, before its commit index "
                    f"{storage._hard_state.commit}"
                )
            last_indexes[group] = max(storage._last, storage._snapshot.index)
        return last_indexes

    def _check_open(self) -> None:
        if self._closed:
            raise StorageClosedError("raft log engine is closed")

    def close(self) -> None:
        """Stop the writer (after the batches it already took) and close the database."""
        if self._closed:
            return
        self._writer.shutdown(wait=True)
        with self._write_lock:
            self._closed = True
            self._groups.clear()
            self._db.close()


class RocksLogStorage:
    """One group's log, term, vote, commit and snapshot in the shared database."""

    def __init__(
        self, engine: RocksLogEngine, group: str, tail_entries: int, tail_bytes: int = DEFAULT_TAIL_BYTES
    ) -> None:
        self._engine = engine
        self.group = group
        self._prefix = _group_prefix(group)
        self._entry_prefix = self._prefix + b"e"
        self._tail_limit = max(tail_entries, 1)
        self._tail_bytes_limit = max(tail_bytes, 1)
        self._hard_state = HardState()
        self._snapshot = Snapshot()
        # The last compacted entry: its term is still answered by term().
        self._offset = 0
        self._offset_term = 0
        self._last = 0
        # Terms change rarely: run starts (ascending) and the term of each run
        # cover offset+1..last without a list entry per index.
        self._run_starts: list[int] = []
        self._run_terms: list[int] = []
        # The most recent entries, _tail[k] at index _tail_first + k, ending at _last.
        self._tail: list[Entry] = []
        self._tail_first = 1
        self._tail_bytes = 0  # the payload bytes in _tail
        # Bumped whenever stored entries are replaced (truncation, snapshot install).
        self._rewrites = 0
        self._dropped = False

    # --- recovery ---

    def _initialise(self, conf_state: ConfState) -> None:
        self._snapshot = Snapshot(SnapshotMetadata(0, 0, conf_state))
        self._engine.stage().put(self._prefix + b"m", _encode_snapshot_metadata(self._snapshot.metadata))

    def _recover(self) -> None:
        try:
            self._recover_stored()
        except (struct.error, ValueError, KeyError, orjson.JSONDecodeError) as exc:
            # checksums passed, yet a record does not decode: damaged all the same
            raise RaftLogDamagedError(f"raft log of group {self.group!r} is unreadable: {exc}") from exc

    def _recover_stored(self) -> None:
        engine = self._engine
        hard = engine._get(self._prefix + b"h")
        if hard is not None:
            self._hard_state = _decode_hard_state(hard)
        meta = engine._get(self._prefix + b"m")
        if meta is not None:
            data = engine._get(self._prefix + b"d") or b""
            self._snapshot = Snapshot(_decode_snapshot_metadata(meta), data)
        offset = engine._get(self._prefix + b"o")
        if offset is not None:
            self._offset, self._offset_term = _PAIR.unpack(offset)
        self._last = self._offset
        self._tail_first = self._offset + 1
        expected = self._offset + 1
        for key, value in engine._scan(self._entry_key(expected), self._prefix + b"f"):
            index = _INDEX.unpack_from(key, len(self._entry_prefix))[0]
            if index != expected:
                raise RaftLogDamagedError(
                    f"raft log of group {self.group!r} has a hole at {expected} (found {index})"
                )
            entry = _decode_entry(index, value)
            self._note_term(index, entry.term)
            self._tail.append(entry)
            self._tail_bytes += len(entry.data)
            self._last = index
            expected += 1
        self._trim_tail(self._last)

    # --- read side (LogStorage) ---

    def initial_state(self) -> InitialState:
        meta = self._snapshot.metadata
        return InitialState(self._hard_state, meta.conf_state, meta.index)

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[Entry]:
        if lo <= self._offset:
            raise CompactedError(f"index {lo} is compacted (first index {self._offset + 1})")
        if hi > self._last + 1:
            raise UnavailableError(f"index {hi - 1} is beyond the last index {self._last}")
        if lo >= hi:
            return []
        if lo >= self._tail_first:
            start = lo - self._tail_first
            return limit_size(self._tail[start : start + (hi - lo)], max_bytes)
        return self._read_entries(lo, hi, max_bytes)

    def _read_entries(self, lo: int, hi: int, max_bytes: int | None) -> list[Entry]:
        found: list[Entry] = []
        size = 0
        stop = min(hi, self._tail_first)
        for key, value in self._engine._scan(self._entry_key(lo), self._entry_key(stop)):
            entry = _decode_entry(_INDEX.unpack_from(key, len(self._entry_prefix))[0], value)
            size += entry_size(entry)
            if max_bytes is not None and found and size > max_bytes:
                return found
            found.append(entry)
        if len(found) != stop - lo:
            raise RuntimeError(f"raft log of group {self.group!r} is missing entries in [{lo}, {stop})")
        if stop < hi:
            budget = None if max_bytes is None else max_bytes - size
            if budget is not None and budget <= 0:
                return found
            found.extend(
                limit_size(self._tail[: hi - stop], budget) if budget is not None else self._tail[: hi - stop]
            )
        return found

    def term(self, index: int) -> int:
        if index < self._offset:
            raise CompactedError(f"index {index} is compacted (first index {self._offset + 1})")
        if index == self._offset:
            return self._offset_term
        if index > self._last:
            raise UnavailableError(f"index {index} is beyond the last index {self._last}")
        return self._run_terms[bisect.bisect_right(self._run_starts, index) - 1]

    def first_index(self) -> int:
        return self._offset + 1

    def last_index(self) -> int:
        return self._last

    def snapshot(self) -> Snapshot:
        return self._snapshot

    # --- write side (the host); each call stages its change for the next persist() ---

    @property
    def hard_state(self) -> HardState:
        return self._hard_state

    def set_hard_state(self, hard_state: HardState) -> None:
        self._check_writable()
        self._hard_state = hard_state
        self._engine.stage().put(self._prefix + b"h", _encode_hard_state(hard_state))

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries, replacing any stored entries from entries[0].index on."""
        self._check_writable()
        if not entries:
            return
        first = entries[0].index
        if first > self._last + 1:
            raise ValueError(f"gap: appending at {first} after last index {self._last}")
        skip = self._offset + 1 - first
        if skip >= len(entries):
            return  # everything offered is already compacted
        if skip > 0:
            entries = entries[skip:]
            first = entries[0].index
        batch = self._engine.stage()
        if first <= self._last:
            batch.delete_range(self._entry_key(first), self._entry_key(self._last + 1))
            self._truncate_from(first)
        key = self._entry_key
        for entry in entries:
            batch.put(key(entry.index), _ENTRY_HEADER.pack(entry.term, entry.type) + entry.data)
        if not self._run_terms or self._run_terms[-1] != entries[0].term:
            self._note_term(first, entries[0].term)
        for entry in entries:
            if entry.term != self._run_terms[-1]:
                self._note_term(entry.index, entry.term)
        self._tail.extend(entries)
        self._tail_bytes += sum(len(entry.data) for entry in entries)
        self._last = entries[-1].index
        self._engine._dirty.add(self)

    def apply_snapshot(self, snapshot: Snapshot) -> None:
        """Replace the whole log with `snapshot` (a follower catching up)."""
        self._check_writable()
        if snapshot.index < self._snapshot.index:
            raise SnapshotOutOfDateError(
                f"snapshot at {snapshot.index} is older than the stored one at {self._snapshot.index}"
            )
        batch = self._engine.stage()
        batch.delete_range(self._entry_key(0), self._prefix + b"f")
        self._store_snapshot(batch, snapshot)
        self._offset, self._offset_term = snapshot.index, snapshot.term
        batch.put(self._prefix + b"o", _PAIR.pack(self._offset, self._offset_term))
        self._last = snapshot.index
        self._run_starts.clear()
        self._run_terms.clear()
        self._tail = []
        self._tail_bytes = 0
        self._tail_first = snapshot.index + 1
        self._rewrites += 1

    def create_snapshot(self, index: int, conf_state: ConfState, data: bytes) -> Snapshot:
        """Record a snapshot of the state machine as of applied entry `index`."""
        self._check_writable()
        if index <= self._snapshot.index:
            raise SnapshotOutOfDateError(f"snapshot at {index} is not newer than {self._snapshot.index}")
        snapshot = Snapshot(SnapshotMetadata(index, self.term(index), conf_state), data)
        self._store_snapshot(self._engine.stage(), snapshot)
        return snapshot

    def compact(self, index: int) -> None:
        """Discard entries up to and including `index` (which a snapshot must cover)."""
        self._check_writable()
        if index <= self._offset:
            return
        if index > self._snapshot.index:
            raise ValueError(f"cannot compact to {index} beyond the snapshot at {self._snapshot.index}")
        new_offset_term = self.term(index)
        batch = self._engine.stage()
        batch.delete_range(self._entry_key(self._offset + 1), self._entry_key(index + 1))
        batch.put(self._prefix + b"o", _PAIR.pack(index, new_offset_term))
        self._offset, self._offset_term = index, new_offset_term
        # Drop the runs wholly below the new first index, keep the one it falls in.
        keep_from = max(bisect.bisect_right(self._run_starts, index + 1) - 1, 0)
        del self._run_starts[:keep_from]
        del self._run_terms[:keep_from]
        if self._run_starts and self._run_starts[0] < index + 1:
            self._run_starts[0] = index + 1
        if index >= self._last:
            self._run_starts.clear()
            self._run_terms.clear()
        if index >= self._tail_first:
            self._drop_tail_front(index + 1 - self._tail_first)

    # --- helpers ---

    def _entry_key(self, index: int) -> bytes:
        return self._entry_prefix + _INDEX.pack(index)

    def _store_snapshot(self, batch: WriteBatch, snapshot: Snapshot) -> None:
        batch.put(self._prefix + b"m", _encode_snapshot_metadata(snapshot.metadata))
        batch.put(self._prefix + b"d", snapshot.data)
        self._snapshot = snapshot

    def _note_term(self, index: int, term: int) -> None:
        self._run_starts.append(index)
        self._run_terms.append(term)

    def _truncate_from(self, index: int) -> None:
        """Forget entries from `index` on (in memory; the caller deletes them on disk)."""
        self._rewrites += 1
        cut = bisect.bisect_left(self._run_starts, index)
        del self._run_starts[cut:]
        del self._run_terms[cut:]
        if index >= self._tail_first:
            self._tail_bytes -= sum(len(entry.data) for entry in self._tail[index - self._tail_first :])
            del self._tail[index - self._tail_first :]
        else:
            self._tail = []
            self._tail_bytes = 0
            self._tail_first = index
        self._last = index - 1

    def _trim_tail(self, durable_last: int) -> None:
        """Keep at most the tail limits (entries, bytes) in memory, dropping only entries up to `durable_last`."""
        durable = durable_last + 1 - self._tail_first
        excess = min(len(self._tail) - self._tail_limit, durable)
        if excess > self._tail_limit // 4:  # trim in chunks, not on every append
            self._drop_tail_front(excess)
            durable -= excess
        if self._tail_bytes > self._tail_bytes_limit:
            # down to three quarters of the limit, so that big entries do not trim on every append
            target = self._tail_bytes_limit * 3 // 4
            count = 0
            dropped = 0
            while count < durable and self._tail_bytes - dropped > target:
                dropped += len(self._tail[count].data)
                count += 1
            self._drop_tail_front(count)

    def _drop_tail_front(self, count: int) -> None:
        self._tail_bytes -= sum(len(entry.data) for entry in self._tail[:count])
        del self._tail[:count]
        self._tail_first += count

    def _check_writable(self) -> None:
        if self._dropped:
            raise StorageClosedError(f"group {self.group!r} was dropped")
