"""RocksStreamStore: the "file" storage type, one stream's keys in the node's shared RocksDB database.

The database is the node's `StreamStoreEngine` (storage/rocks_engine.py); every
key of a store starts with the store's 8-byte id (`<id>` below), so its keys sort
by sequence within the store and a store is deleted by range. Three column families:

    msgs   key: <id> seq (8 bytes, big-endian, so keys sort by sequence)
           value: the message record of storage/record.py (deep-dive layout)
    meta   <id> b"format"     b"1"
           <id> b"config"     the StoreConfig as JSON
           <id> b"last"       last_seq:8 last_ts:8 generation:8 (little-endian): they outlive purges
           <id> b"applied"    the metadata value of the last write group (Raft applied index)
           <id> b"restoring"  present only while a snapshot is being written in
           <id> b"index"      the in-memory index saved by close (storage/index_snapshot.py)
           <id> b"ttls"       b"1": the `ttls` family is kept up to date (absent in stores written before it)
    ttls   key: <id> seq (as in msgs), for each live message with a valid Nats-TTL header
           value: ttl_s:8 (signed, -1 for never) deadline_ns:8 (little-endian)

The in-memory `StreamIndex` (storage/index.py) answers all sequence questions;
RocksDB is read only for message bodies. `generation` counts the store's writes:
every batch that changes the store writes `last` with it increased. A clean close
saves the index stamped with the generation; opening uses it only if `last` still
holds that generation (nothing was written to this store since: other stores'
writes to the shared database do not count), and deletes it at once either way.
Otherwise (a crash, or a `last` written without a generation by the layout
before it) every record is read once to rebuild it, so a crash costs time, never
correctness.

Writes: each public write (or each outermost write group) stages its puts and
deletes in one `WriteBatch` plus a dict of records not yet written, so the
writer reads its own writes; the batch is written when the write (or group)
ends, with the `last` key, in one atomic RocksDB write. The shared WAL is
fsynced only by `sync()` or `write_group(sync=True)`, outside the store's lock.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import orjson
from rocksdict import WriteBatch

from storage.config import DiscardPolicy, StoreConfig
from storage.errors import (
    CorruptStoreError,
    InvalidRequestError,
    Limit,
    LimitExceededError,
    MsgNotFoundError,
    MsgTooBigError,
    SequenceMismatchError,
    StoreClosedError,
    StoreEOFError,
    TooManyResultsError,
)
from storage.group import WriteGroup
from storage.index import (
    StreamIndex,
    seqs_count,
    seqs_first,
    seqs_iter,
    seqs_last,
    seqs_last_at_or_before,
)
from storage.index_snapshot import decode_index, encode_index
from storage.model import (
    MsgBatch,
    Rollup,
    SimpleState,
    StoredMsg,
    StoreResult,
    StreamState,
    msg_size,
    rolled_up_subjects,
)
from storage.msg_ttl import NATS_TTL, TTL_NEVER, stored_ttl, ttl_deadline_ns
from storage.record import decode_record, encode_record, record_header, record_headers, record_ts
from storage.rocks_engine import STORE_APPLIED_KEY, StreamStoreEngine, damage_error, prefix_end
from storage.rocks_migrate import migrate_legacy_store
from storage.seq_set import SeqSet
from storage.snapshot import SnapshotHeader, SnapshotReader, encode_snapshot
from storage.ttl_index import TtlIndex
from storage.validation import (
    ALL_SUBJECTS,
    MAX_SEQ,
    check_count,
    check_filter,
    check_headers,
    check_payload,
    check_seq,
    check_subject,
    check_ts,
    is_literal,
)

MAX_MULTI_LAST = 1024
_KEY = struct.Struct(">Q")
_PREFIX_LEN = 8
_LAST = struct.Struct("<QqQ")
# `last` as the one-database-per-stream layout wrote it, without a generation
_LEGACY_LAST = struct.Struct("<Qq")
_TTL = struct.Struct("<qq")
_FORMAT = b"1"
_META_FORMAT = b"format"
_META_CONFIG = b"config"
_META_LAST = b"last"
_META_APPLIED = STORE_APPLIED_KEY
_META_RESTORING = b"restoring"
_META_INDEX = b"index"
_META_TTLS = b"ttls"
# Enum members the write path compares with, as module names: reading `Rollup.SUBJECT` goes through
# the enum class's attribute lookup, ~0.2 us on CPython 3.11, several times per stored message.
_DISCARD_NEW = DiscardPolicy.NEW
_DISCARD_OLD = DiscardPolicy.OLD
_ROLLUP_SUBJECT = Rollup.SUBJECT
_ROLLUP_ALL = Rollup.ALL
# Records written per RocksDB batch while restoring a snapshot.
_RESTORE_BATCH = 10_000
# The store name `open_alone` gives the one store of its own engine.
ALONE_NAME = "stream"


def _decode_last(value: bytes | None) -> tuple[int, int, int | None]:
    """(last_seq, last_ts, generation); generation None when written without one (the old layout)."""
    if value is None:
        return 0, 0, None
    if len(value) == _LEGACY_LAST.size:
        last_seq, last_ts = _LEGACY_LAST.unpack(value)
        return last_seq, last_ts, None
    return _LAST.unpack(value)


class RocksStreamStore:
    """A durable stream store, one of many in a node's `StreamStoreEngine`; see storage/interface.py
    for the contract.

    `name` identifies the store in the engine (the replica uses `<stream>-<created_ns>`).
    `config` given to the constructor replaces the stored one (and trims to it);
    without it the stored configuration is used, or the defaults for a new store.
    """

    storage_type = "file"
    # `_release_db` deletes these (rocksdict keeps the database open while any of them lives); a class
    # compiled by mypyc lets an attribute be deleted only when it says so here
    __deletable__ = ("_db", "_meta_cf", "_meta_handle", "_msgs_cf", "_msgs_handle", "_ttls_cf", "_ttls_handle")

    def __init__(
        self,
        engine: StreamStoreEngine,
        name: str,
        config: StoreConfig | None = None,
        *,
        owns_engine: bool = False,
    ) -> None:
        self._engine = engine
        self._name = name
        # a store made by `open_alone` closes its engine with it
        self._owns_engine = owns_engine
        self._lock = threading.RLock()
        # Held around fsync and close only, so an fsync never waits for readers or writers.
        self._sync_lock = threading.Lock()
        self._closed = False
        self._failure: Exception | None = None
        self._depth = 0
        self._sync_requested = False
        self._batch = WriteBatch(raw_mode=True)
        self._dirty = False
        self._pending: dict[int, bytes] = {}
        self._pending_erase: list[int] = []
        self._first_ts_cache = (0, 0)
        # (seq, ts) of the first message max_age can remove, when it is not the first message
        self._aging_ts_cache = (0, 0)
        self._ttl = TtlIndex()
        self._generation = 0
        self._meta: bytes | None = None
        created = False

        def first_records(prefix: bytes, batch: WriteBatch) -> None:
            # a store new to the engine: its format, TTL marker and limits go in the write that registers
            # it, and opening it reads nothing (six reads, two scans and three writes before)
            nonlocal created
            created = True
            first_config = config if config is not None else StoreConfig()
            batch.put(prefix + _META_FORMAT, _FORMAT, engine.meta_handle)
            batch.put(prefix + _META_TTLS, b"1", engine.meta_handle)
            batch.put(prefix + _META_CONFIG, orjson.dumps(first_config.to_json_dict()), engine.meta_handle)

        # an old-layout store of this name may wait to be migrated under the new id: open it as before
        self._prefix = engine.attach(name, self, first_records if engine.legacy_root is None else None)
        self._end = prefix_end(self._prefix)
        self._db = engine.db
        self._msgs_cf = engine.msgs_cf
        self._msgs_handle = engine.msgs_handle
        self._meta_cf = engine.meta_cf
        self._meta_handle = engine.meta_handle
        self._ttls_cf = engine.ttls_cf
        self._ttls_handle = engine.ttls_handle
        try:
            if created:
                self._open_created(config)
            else:
                if engine.legacy_root is not None:
                    migrate_legacy_store(engine, engine.legacy_root / name, self._prefix)
                self._open_existing(config)
        except BaseException as exc:
            self._release_db()
            if isinstance(exc, Exception) and type(exc) is Exception:
                # rocksdict's bare Exception: RocksDB's status (a Corruption becomes CorruptStoreError)
                raise damage_error(exc, f"opening store {name}") from exc
            raise

    @classmethod
    def open_alone(cls, path: str | Path, config: StoreConfig | None = None) -> RocksStreamStore:
        """A store in an engine of its own at `path`, closed with it (tools, tests, benchmarks)."""
        engine = StreamStoreEngine(path)
        try:
            return cls(engine, ALONE_NAME, config, owns_engine=True)
        except BaseException:
            engine.close()
            raise

    def _k(self, seq: int) -> bytes:
        return self._prefix + _KEY.pack(seq)

    def _mkey(self, name: bytes) -> bytes:
        return self._prefix + name

    def _scan(self, cf: object) -> Iterator[tuple[int, bytes]]:
        """(sequence, value) of this store's keys in `cf` (msgs or ttls), ascending."""
        for key, value in StreamStoreEngine.scan(cf, self._prefix, self._end):  # type: ignore[arg-type]
            yield _KEY.unpack_from(key, _PREFIX_LEN)[0], value

    def _open_created(self, config: StoreConfig | None) -> None:
        """The state `_open_existing` reads back from a store that holds nothing but its first records."""
        self._config = config if config is not None else StoreConfig()
        self._meta = None
        self._index = StreamIndex()
        self._ttl = TtlIndex(self._config.allow_msg_ttl)

    def _open_existing(self, config: StoreConfig | None) -> None:
        stored_format = self._meta_cf.get(self._mkey(_META_FORMAT))
        if stored_format is not None and stored_format != _FORMAT:
            raise CorruptStoreError(f"unknown stream store format {stored_format!r} in {self._name}")
        # read first: even the wipe below moves it on, never back
        self._generation = _decode_last(self._meta_cf.get(self._mkey(_META_LAST)))[2] or 0
        if self._meta_cf.get(self._mkey(_META_RESTORING)) is not None:
            # A restore was cut off: what is on disk is part of a snapshot. Start
            # empty and without metadata, so Raft sends the snapshot again.
            self._wipe()
        stored_config = self._meta_cf.get(self._mkey(_META_CONFIG))
        self._config = (
            StoreConfig.from_json_dict(orjson.loads(stored_config)) if stored_config else StoreConfig()
        )
        self._meta = self._meta_cf.get(self._mkey(_META_APPLIED))
        self._index = self._saved_index() or self._load_index()
        self._ttl = self._load_ttls()
        if stored_format is None:
            self._meta_cf.put(self._mkey(_META_FORMAT), _FORMAT)
        if config is not None and config != self._config:
            self.update_config(config)
        elif stored_config is None:
            self._meta_cf.put(self._mkey(_META_CONFIG), orjson.dumps(self._config.to_json_dict()))

    def _saved_index(self) -> StreamIndex | None:
        """The index saved by the last clean close, if nothing has been written to this store since."""
        blob = self._meta_cf.get(self._mkey(_META_INDEX))
        if blob is None:
            return None
        # Never trusted twice: the next open after this one scans unless we close cleanly.
        self._meta_cf.delete(self._mkey(_META_INDEX))
        last_seq, last_ts, generation = _decode_last(self._meta_cf.get(self._mkey(_META_LAST)))
        if generation is None:
            return None
        index = decode_index(blob, generation)
        if index is None or (last_seq, last_ts) != (index.last_seq, index.last_ts):
            return None
        return index

    def _load_ttls(self) -> TtlIndex:
        """The TTL index from the `ttls` family, which every write keeps in step with `msgs`.

        A store written before the family existed has none: its records are read once to fill it.
        """
        ttl = TtlIndex(self._config.allow_msg_ttl)
        if self._meta_cf.get(self._mkey(_META_TTLS)) is None:
            batch = WriteBatch(raw_mode=True)
            for _, record in self._scan(self._msgs_cf):
                if NATS_TTL in record:
                    msg = decode_record(record, verify_hash=False)
                    self._stage_ttl(batch, ttl, msg.seq, msg.ts_ns, stored_ttl(msg.headers))
            batch.put(self._mkey(_META_TTLS), b"1", self._meta_handle)
            self._db.write(batch)
            return ttl
        live = self._index.live
        for seq, value in self._scan(self._ttls_cf):
            if seq not in live:
                raise CorruptStoreError(f"TTL entry for sequence {seq}, which holds no message")
            ttl_s, deadline = _TTL.unpack(value)
            if ttl_s == TTL_NEVER:
                ttl.never.add(seq)
            else:
                ttl.add_deadline(seq, deadline)
        return ttl

    def _stage_ttl(self, batch: WriteBatch, ttl: TtlIndex, seq: int, ts_ns: int, ttl_s: int) -> None:
        """Index a message's TTL and put it in `batch` (nothing for a message without one)."""
        if ttl_s == 0:
            return
        deadline = ttl_deadline_ns(ts_ns, ttl_s) if ttl_s > 0 else 0
        batch.put(self._k(seq), _TTL.pack(ttl_s, deadline), self._ttls_handle)
        ttl.add(seq, ts_ns, ttl_s)

    def _save_index(self) -> None:
        """Called by close with nothing staged: the index, stamped with the generation `last` holds."""
        self._meta_cf.put(self._mkey(_META_INDEX), encode_index(self._index, self._generation))

    def _last_value(self, last_seq: int, last_ts: int) -> bytes:
        """`last` for the batch being written: every batch that changes the store moves the generation."""
        self._generation += 1
        return _LAST.pack(last_seq, last_ts, self._generation)

    def _load_index(self) -> StreamIndex:
        index = StreamIndex()
        subjects: dict[bytes, str] = {}
        for seq, record in self._scan(self._msgs_cf):
            record_seq, _, subject_bytes = record_header(record)
            if record_seq != seq:
                raise CorruptStoreError(f"record under key {seq} says sequence {record_seq}")
            subject = subjects.get(subject_bytes)
            if subject is None:
                subject = subjects[subject_bytes] = subject_bytes.decode()
            index.add(seq, subject, len(record))
        index.last_seq, index.last_ts, _ = _decode_last(self._meta_cf.get(self._mkey(_META_LAST)))
        highest = index.live.last()
        if highest is not None and highest > index.last_seq:
            raise CorruptStoreError(f"message {highest} is past the stored last sequence {index.last_seq}")
        return index

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The directory of the engine's database, which this store shares with the node's others."""
        return self._engine.path

    @property
    def name(self) -> str:
        return self._name

    @property
    def engine(self) -> StreamStoreEngine:
        return self._engine

    @property
    def config(self) -> StoreConfig:
        return self._config

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def metadata(self) -> bytes | None:
        with self._reading():
            return self._meta

    def close(self) -> None:
        self._close(save_index=True)

    def delete(self) -> None:
        """Close the store and delete its keys from the engine (RocksDB's compaction reclaims the space)."""
        self._close(save_index=False, then=lambda: self._engine.drop_store(self._name))

    def _close(self, *, save_index: bool, then: Callable[[], None] | None = None) -> None:
        with self._lock:
            if self._closed:
                if then is not None:
                    then()
                return
            if self._depth:
                raise InvalidRequestError("cannot close a stream store inside a write group")
            with self._sync_lock:
                self._closed = True
                try:
                    if save_index and self._failure is None:
                        self._save_index()
                finally:
                    self._release_db(then)

    def _release_db(self, then: Callable[[], None] | None = None) -> None:
        """Let go of the engine; `then` runs once detached, before an engine of its own is closed."""
        # rocksdict keeps the database open while any column family object lives.
        del self._msgs_cf, self._msgs_handle, self._meta_cf, self._meta_handle
        del self._ttls_cf, self._ttls_handle, self._db
        self._engine.detach(self._name)
        try:
            if then is not None:
                then()
        finally:
            if self._owns_engine:
                self._engine.close()

    @contextmanager
    def write_group(self, *, sync: bool = False) -> Iterator[WriteGroup]:
        group = WriteGroup(sync=sync, store_msg=self._store_in_group)
        need_sync = False
        try:
            with self._lock:
                self._check_open()
                self._depth += 1
                try:
                    yield group
                finally:
                    if group.meta is not None:
                        self._meta = bytes(group.meta)
                        self._batch.put(self._mkey(_META_APPLIED), self._meta, self._meta_handle)
                        self._dirty = True
                    self._sync_requested |= group.sync
                    self._depth -= 1
                    if self._depth == 0:
                        requested, self._sync_requested = self._sync_requested, False
                        self._commit()
                        need_sync = requested
        finally:
            if need_sync:
                self._sync_wal()

    def sync(self) -> None:
        with self._lock:
            self._check_open()
            if self._depth:
                raise InvalidRequestError("sync() inside a write group: open the group with sync=True")
        self._sync_wal()

    def _sync_wal(self) -> None:
        with self._sync_lock:
            if self._closed:
                raise StoreClosedError("stream store is closed")
            # The shared WAL: this store's writes and every other store's made so far become durable.
            self._engine.sync()

    # -- writes ------------------------------------------------------------------------

    def store_msg(
        self,
        subject: str,
        headers: bytes | None,
        payload: bytes,
        ts_ns: int | None = None,
        *,
        rollup: Rollup | None = None,
    ) -> StoreResult:
        # _writing() spelled out: this is the hottest write path.
        with self._lock:
            self._check_open()
            self._depth += 1
            try:
                return self._store(subject, headers, payload, 0, ts_ns, rollup)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._commit()

    def _store_in_group(
        self, subject: str, headers: bytes | None, payload: bytes, ts_ns: int | None, rollup: Rollup | None
    ) -> StoreResult:
        """`store_msg` from inside an open write group, on its thread (`WriteGroup.store_msg`): the group
        holds the lock and checked the store open, and commits at its end."""
        if not self._depth:
            raise InvalidRequestError("a write group's store_msg used after the group closed")
        return self._store(subject, headers, payload, 0, ts_ns, rollup)

    def store_raw_msg(
        self,
        subject: str,
        headers: bytes | None,
        payload: bytes,
        seq: int,
        ts_ns: int,
        *,
        rollup: Rollup | None = None,
    ) -> StoreResult:
        # _writing() spelled out, as in store_msg: every message a mirror copies (or a restore puts back)
        # comes this way, and contextlib's generator around each was the largest Python cost of a restore's
        # apply in its profile
        with self._lock:
            self._check_open()
            self._depth += 1
            try:
                check_seq(seq)
                if seq <= self._index.last_seq:
                    raise SequenceMismatchError(
                        f"sequence {seq} is not after last sequence {self._index.last_seq}"
                    )
                return self._store(subject, headers, payload, seq, ts_ns, rollup)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._commit()

    def skip_msg(self, seq: int = 0) -> int:
        with self._writing():
            seq = self._next_seq_or_mismatch(seq)
            self._index.last_seq = seq
            self._dirty = True
            return seq

    def skip_msgs(self, seq: int, num: int) -> None:
        with self._writing():
            seq = self._next_seq_or_mismatch(seq)
            if check_count(num, "num") == 0:
                raise InvalidRequestError("num must be at least 1")
            self._index.last_seq = check_seq(seq + num - 1)
            self._dirty = True

    def remove_msg(self, seq: int) -> bool:
        with self._writing():
            return self._remove(check_seq(seq))

    def erase_msg(self, seq: int) -> bool:
        """Remove, then compact the key's range once written, so the bytes leave the SST files.

        RocksDB's WAL may still hold them until it rolls over.
        """
        with self._writing():
            removed = self._remove(check_seq(seq))
            if removed:
                self._pending_erase.append(seq)
            return removed

    def purge(self) -> int:
        with self._writing():
            return self._purge_all(self._index.last_seq + 1)

    def purge_ex(self, subject: str = "", seq: int = 0, keep: int = 0) -> int:
        with self._writing():
            filter_ = check_filter(subject)
            check_seq(seq)
            check_count(keep, "keep")
            if seq == 1:
                return 0
            if filter_ == ALL_SUBJECTS:
                if keep == 0 and seq == 0:
                    return self._purge_all(self._index.last_seq + 1)
                if seq > 1:
                    return self._compact(seq)
            matching = self._index.filtered_state(1, filter_)
            if matching.msgs == 0:
                return 0
            to_purge = matching.msgs
            if keep > 0:
                if keep >= matching.msgs:
                    return 0
                to_purge = matching.msgs - keep
            upper = matching.last if seq == 0 else seq - 1
            victims = sorted(
                s
                for subject_ in self._index.matching_subjects(filter_)
                for s in seqs_iter(self._index.subjects[subject_])
                if s <= upper
            )[:to_purge]
            for victim in victims:
                self._remove(victim)
            return len(victims)

    def compact(self, seq: int) -> int:
        with self._writing():
            return self._compact(check_seq(seq))

    def truncate(self, seq: int) -> None:
        with self._writing():
            check_seq(seq)
            index = self._index
            if seq > index.last_seq:
                raise InvalidRequestError(
                    f"cannot truncate to {seq}, past the last sequence {index.last_seq}"
                )
            if seq == 0:
                self._purge_all(1)
                index.last_ts = 0
                return
            for victim in list(index.live.iter_from(seq + 1)):
                self._remove(victim)
            if seq in index.live:
                index.last_ts = record_ts(self._record(seq))
            index.last_seq = seq
            self._dirty = True
            self._ttl.reset_age_cursor()
            self._aging_ts_cache = (0, 0)

    def expiry_due(self, now_ns: int, limit: int = 0) -> tuple[int, ...]:
        with self._reading():
            return tuple(self._due(check_ts(now_ns), check_count(limit, "limit")))

    def expire(self, now_ns: int, limit: int = 0) -> tuple[int, ...]:
        with self._writing():
            due = self._due(check_ts(now_ns), check_count(limit, "limit"))
            for seq in due:
                self._remove(seq)
            return tuple(due)

    def next_expiry_ns(self) -> int | None:
        with self._reading():
            next_ttl = self._ttl.next_deadline()
            max_age = self._config.max_age_ns
            aging = self._first_aging() if max_age > 0 else None
            if aging is None:
                return next_ttl
            by_age = self._aging_ts(aging) + max_age
            return by_age if next_ttl is None else min(by_age, next_ttl)

    def update_config(self, config: StoreConfig, now_ns: int | None = None) -> tuple[int, ...]:
        with self._writing():
            self._config = config
            self._ttl.set_active(config.allow_msg_ttl)
            self._batch.put(self._mkey(_META_CONFIG), orjson.dumps(config.to_json_dict()), self._meta_handle)
            self._dirty = True
            removed: list[int] = []
            self._enforce_msg_and_byte_limits(removed)
            if config.max_msgs_per_subject > 0:
                for subject in list(self._index.subjects):
                    self._enforce_subject_limit(subject, removed)
            if now_ns is not None and config.expires_on_writes:
                self._expire(check_ts(now_ns), removed)
            return tuple(sorted(removed))

    # -- reads -------------------------------------------------------------------------

    def load_msg(self, seq: int) -> StoredMsg:
        with self._lock:
            self._check_open()
            if check_seq(seq) not in self._index.live:
                raise MsgNotFoundError(f"no message at sequence {seq}")
            return decode_record(self._record(seq), verify_hash=False)

    def load_next_msg(self, filter_: str, start_seq: int) -> StoredMsg:
        with self._reading():
            filter_ = check_filter(filter_)
            seq = self._next_match(filter_, check_seq(start_seq, "start sequence"))
            if seq is None:
                raise StoreEOFError(f"no message matching {filter_!r} at or after sequence {start_seq}")
            return decode_record(self._record(seq), verify_hash=False)

    def load_last_msg(self, filter_: str) -> StoredMsg:
        with self._lock:
            self._check_open()
            index = self._index
            # Fast path: a stored literal subject's last sequence is the answer (a stored `a.*` is not
            # one: as a filter it matches `a.b` too).
            entry = index.subjects.get(filter_) if isinstance(filter_, str) and is_literal(filter_) else None
            if entry is not None:
                seq = seqs_last(entry)
            else:
                seq = index.last_seq_matching(check_filter(filter_), index.last_seq)
                if seq == 0:
                    raise MsgNotFoundError(f"no message matching {filter_!r}")
            return decode_record(self._record(seq), verify_hash=False)

    def load_batch(self, filter_: str, start_seq: int, max_msgs: int, max_bytes: int = 0) -> MsgBatch:
        with self._reading():
            filter_ = check_filter(filter_)
            seq = check_seq(start_seq, "start sequence")
            if check_count(max_msgs, "max_msgs") == 0:
                raise InvalidRequestError("max_msgs must be at least 1")
            check_count(max_bytes, "max_bytes")
            found: list[StoredMsg] = []
            sent_bytes = 0
            while len(found) < max_msgs:
                next_seq = self._next_match(filter_, seq)
                if next_seq is None:
                    break
                msg = decode_record(self._record(next_seq), verify_hash=False)
                found.append(msg)
                seq = next_seq + 1
                sent_bytes += len(msg.subject) + len(msg.headers or b"") + len(msg.payload)
                if max_bytes and sent_bytes >= max_bytes:
                    break
            return MsgBatch(tuple(found), self._index.filtered_state(seq, filter_).msgs)

    def headers_from(self, start_seq: int) -> list[tuple[int, int, bytes]]:
        with self._reading():
            seq = check_seq(start_seq, "start sequence")
            live, pending = self._index.live, self._pending
            found: list[tuple[int, int, bytes]] = []
            # one iterator over the records (a point read each would cost several times more), then the
            # records of the write group not written yet; removed records may still be in either
            scan = StreamStoreEngine.scan(self._msgs_cf, self._k(seq), self._end)  # type: ignore[arg-type]
            unwritten = ((at, pending[at]) for at in sorted(at for at in pending if at >= seq))
            for key, record in scan:
                at = _KEY.unpack_from(key, _PREFIX_LEN)[0]
                if at in live and at not in pending:
                    found.extend(_with_headers(at, record))
            for at, record in unwritten:
                if at in live:
                    found.extend(_with_headers(at, record))
            if pending:
                found.sort()
            return found

    def subject_for_seq(self, seq: int) -> str:
        with self._reading():
            if check_seq(seq) not in self._index.live:
                raise MsgNotFoundError(f"no message at sequence {seq}")
            return self._subject_at(seq)

    def get_seq_from_time(self, ts_ns: int) -> int:
        with self._reading():
            return self._seq_from_time(check_ts(ts_ns))

    def multi_last_seqs(
        self,
        filters: Sequence[str],
        up_to_seq: int = 0,
        *,
        up_to_ts_ns: int | None = None,
        max_allowed: int = MAX_MULTI_LAST,
    ) -> list[int]:
        with self._reading():
            checked = [check_filter(f) for f in filters]
            check_seq(up_to_seq, "up_to_seq")
            if up_to_ts_ns is not None and up_to_seq:
                raise InvalidRequestError("give up_to_seq or up_to_ts_ns, not both")
            index = self._index
            if not index.msgs:
                return []
            if up_to_ts_ns is not None:
                from_time = self._seq_from_time(check_ts(up_to_ts_ns))
                if from_time <= index.first_seq:
                    return []
                up_to_seq = from_time - 1
            if up_to_seq == 0:
                up_to_seq = index.last_seq
            seqs: set[int] = set()
            for filter_ in checked:
                for subject in index.matching_subjects(filter_):
                    found = seqs_last_at_or_before(index.subjects[subject], up_to_seq)
                    if found is not None:
                        seqs.add(found)
                if max_allowed > 0 and len(seqs) > max_allowed:
                    raise TooManyResultsError(f"more than {max_allowed} subjects match")
            return sorted(seqs)

    def num_pending(self, start_seq: int, filter_: str, last_per_subject: bool = False) -> int:
        with self._reading():
            filter_ = check_filter(filter_)
            start = check_seq(start_seq, "start sequence")
            index = self._index
            if last_per_subject:
                return sum(
                    1 for s in index.matching_subjects(filter_) if seqs_last(index.subjects[s]) >= start
                )
            return index.filtered_state(start, filter_).msgs

    def filtered_state(self, start_seq: int, filter_: str) -> SimpleState:
        with self._reading():
            return self._index.filtered_state(check_seq(start_seq, "start sequence"), check_filter(filter_))

    def subjects_state(self, filter_: str) -> dict[str, SimpleState]:
        with self._reading():
            index = self._index
            return {s: index.subject_state(s) for s in index.matching_subjects(check_filter(filter_))}

    def subjects_totals(self, filter_: str) -> dict[str, int]:
        with self._reading():
            index = self._index
            return {s: seqs_count(index.subjects[s]) for s in index.matching_subjects(check_filter(filter_))}

    def state(self, include_deleted: bool = False) -> StreamState:
        with self._reading():
            index = self._index
            messages = index.msgs
            first_seq = index.first_seq
            span = index.last_seq - first_seq + 1 if messages else 0
            deleted: tuple[int, ...] | None = None
            if include_deleted:
                deleted = tuple(index.live.missing_in(first_seq, index.last_seq)) if messages else ()
            return StreamState(
                messages=messages,
                bytes=index.bytes,
                first_seq=first_seq,
                first_ts_ns=self._first_ts(),
                last_seq=index.last_seq,
                last_ts_ns=index.last_ts,
                num_subjects=len(index.subjects),
                num_deleted=span - messages,
                deleted=deleted,
            )

    # -- snapshots ---------------------------------------------------------------------

    def snapshot(self) -> Iterator[bytes]:
        """A point-in-time chunk stream; do not close the store before it is consumed."""
        return self.frozen_snapshot()()

    def frozen_snapshot(self) -> Callable[[], Iterator[bytes]]:
        """The store as it is now, to stream later, as often as needed: each call of the result is a
        chunk stream of this moment's contents, whatever was written since (a RocksDB snapshot holds
        the old records until the result is dropped). Taking it costs a copy of the live-sequence set."""
        with self._reading():
            if self._depth:
                raise InvalidRequestError("cannot snapshot inside a write group")
            index = self._index
            header = SnapshotHeader(
                config=self._config,
                first_seq=index.first_seq,
                last_seq=index.last_seq,
                last_ts_ns=index.last_ts,
                messages=index.msgs,
                bytes=index.bytes,
                metadata=self._meta,
            )
            live = index.live.copy()
            # Point reads through a RocksDB snapshot see the store as it is now;
            # rocksdict's snapshot iterators do not (0.3.29), so read key by key.
            view = self._msgs_cf.snapshot()
        return lambda: encode_snapshot(header, self._snapshot_records(live, view))

    def _snapshot_records(self, live: SeqSet, view: object) -> Iterator[bytes]:
        for seq in live.iter_from(0):
            if self._closed:
                raise StoreClosedError("stream store closed during a snapshot")
            yield view[self._k(seq)]  # type: ignore[index]

    def restore(self, chunks: Iterable[bytes]) -> None:
        """Replace the store with a snapshot. The records are streamed into place, so a
        snapshot that turns out corrupt half way leaves the store empty (and says so)."""
        with self._writing():
            if self._depth > 1:
                raise InvalidRequestError("cannot restore inside a write group")
            reader = SnapshotReader(chunks)
            header = reader.header
            self._wipe(marker=True)
            try:
                self._restore_records(reader, header)
            except BaseException:
                self._wipe()
                raise
            batch = WriteBatch(raw_mode=True)
            batch.put(self._mkey(_META_CONFIG), orjson.dumps(header.config.to_json_dict()), self._meta_handle)
            batch.put(
                self._mkey(_META_LAST),
                self._last_value(header.last_seq, header.last_ts_ns),
                self._meta_handle,
            )
            if header.metadata is not None:
                batch.put(self._mkey(_META_APPLIED), header.metadata, self._meta_handle)
            batch.delete(self._mkey(_META_RESTORING), self._meta_handle)
            self._write_now(batch)
            self._config = header.config
            self._ttl.set_active(header.config.allow_msg_ttl)
            self._meta = header.metadata
            self._index.last_seq = header.last_seq
            self._index.last_ts = header.last_ts_ns

    def _restore_records(self, reader: SnapshotReader, header: SnapshotHeader) -> None:
        index = self._index
        previous = header.first_seq - 1
        batch = WriteBatch(raw_mode=True)
        staged = 0
        for record in reader.records():
            msg = decode_record(record)
            if not previous < msg.seq <= header.last_seq:
                raise CorruptStoreError(f"snapshot record {msg.seq} is out of order or out of range")
            if previous == header.first_seq - 1 and msg.seq != header.first_seq:
                raise CorruptStoreError("snapshot's first record is not at its first_seq")
            previous = msg.seq
            batch.put(self._k(msg.seq), record, self._msgs_handle)
            index.add(msg.seq, msg.subject, len(record))
            if msg.headers:
                self._stage_ttl(batch, self._ttl, msg.seq, msg.ts_ns, stored_ttl(msg.headers))
            staged += 1
            if staged == _RESTORE_BATCH:
                self._write_now(batch)
                batch = WriteBatch(raw_mode=True)
                staged = 0
        self._write_now(batch)

    def _wipe(self, *, marker: bool = False) -> None:
        """Drop every message and the metadata; with `marker`, flag a restore in progress."""
        batch = WriteBatch(raw_mode=True)
        if marker:
            batch.put(self._mkey(_META_RESTORING), b"1", self._meta_handle)
        else:
            batch.delete(self._mkey(_META_RESTORING), self._meta_handle)
        batch.delete_range(self._prefix, self._end, self._msgs_handle)
        batch.delete_range(self._prefix, self._end, self._ttls_handle)
        batch.put(self._mkey(_META_TTLS), b"1", self._meta_handle)
        batch.delete(self._mkey(_META_APPLIED), self._meta_handle)
        batch.delete(self._mkey(_META_INDEX), self._meta_handle)
        batch.put(self._mkey(_META_LAST), self._last_value(0, 0), self._meta_handle)
        self._write_now(batch)
        self._pending.clear()
        self._batch = WriteBatch(raw_mode=True)
        self._dirty = False
        self._meta = None
        self._first_ts_cache = (0, 0)
        self._aging_ts_cache = (0, 0)
        self._ttl.clear()
        if hasattr(self, "_index"):
            self._index.clear(0)
            self._index.last_ts = 0

    # -- internals: staging and reading ------------------------------------------------

    def _check_open(self) -> None:
        if self._failure is None and not self._closed:
            return
        if self._closed:
            raise StoreClosedError("stream store is closed")
        if self._failure is not None:
            raise StoreClosedError(f"stream store failed a disk write: {self._failure}")

    @contextmanager
    def _reading(self) -> Iterator[None]:
        with self._lock:
            self._check_open()
            yield

    @contextmanager
    def _writing(self) -> Iterator[None]:
        with self._lock:
            self._check_open()
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._commit()

    def _commit(self) -> None:
        if not self._dirty:
            return
        index = self._index
        self._batch.put(
            self._mkey(_META_LAST), self._last_value(index.last_seq, index.last_ts), self._meta_handle
        )
        batch, self._batch = self._batch, WriteBatch(raw_mode=True)
        self._dirty = False
        try:
            self._write_now(batch)
        finally:
            self._pending.clear()
        erased, self._pending_erase = self._pending_erase, []
        for seq in erased:
            self._msgs_cf.compact_range(self._k(seq), self._k(seq + 1))

    def _write_now(self, batch: WriteBatch) -> None:
        try:
            self._db.write(batch)
        except Exception as exc:
            # Memory is ahead of disk now; refuse everything until reopened.
            self._failure = exc
            raise StoreClosedError(f"stream store write failed: {exc}") from exc

    def _put_record(self, seq: int, record: bytes) -> None:
        self._batch.put(self._k(seq), record, self._msgs_handle)
        self._pending[seq] = record
        self._dirty = True
        if self._first_ts_cache[0] == seq:
            # After a truncate a sequence can be written again with another timestamp.
            self._first_ts_cache = (0, 0)
        if self._aging_ts_cache[0] == seq:
            self._aging_ts_cache = (0, 0)

    def _delete_record(self, seq: int) -> None:
        self._batch.delete(self._k(seq), self._msgs_handle)
        self._pending.pop(seq, None)
        self._dirty = True

    def _record(self, seq: int) -> bytes:
        record = self._pending.get(seq)
        if record is None:
            try:
                record = self._msgs_cf.get(self._k(seq))
            except Exception as exc:  # rocksdict raises a bare Exception for RocksDB's Corruption status
                error = damage_error(exc, f"store {self._name}, sequence {seq}")
                if isinstance(error, CorruptStoreError):
                    self._engine.note_damage(str(error))
                raise error from exc
            if record is None:
                raise CorruptStoreError(f"index lists sequence {seq} but RocksDB has no record for it")
        return record

    def _subject_at(self, seq: int) -> str:
        return record_header(self._record(seq))[2].decode()

    def _first_ts(self) -> int:
        first = self._index.live.first()
        if first is None:
            return 0
        cached_seq = self._first_ts_cache[0]
        if cached_seq != first:
            self._first_ts_cache = (first, record_ts(self._record(first)))
        return self._first_ts_cache[1]

    # -- internals: store semantics ----------------------------------------------------

    def _store(
        self,
        subject: str,
        headers: bytes | None,
        payload: bytes,
        seq: int,
        ts_ns: int | None,
        rollup: Rollup | None,
    ) -> StoreResult:
        index = self._index
        # A subject the index already holds was validated when it was first stored.
        if type(subject) is str and subject in index.subjects:
            subject_bytes = subject.encode()
        else:
            subject_bytes = check_subject(subject)
        if headers is not None:
            headers = check_headers(headers)
        if type(payload) is not bytes:
            payload = check_payload(payload)
        ts = time.time_ns() if ts_ns is None else check_ts(ts_ns)
        if rollup is not None:
            rollup = Rollup(rollup)
        config = self._config
        body_size = len(payload) if headers is None else len(headers) + len(payload)
        if 0 < config.max_msg_size < body_size:
            raise MsgTooBigError(body_size, config.max_msg_size)
        size = msg_size(len(subject_bytes), None if headers is None else len(headers), len(payload))
        if config.discard is _DISCARD_NEW:
            self._check_discard_new(subject, size, rollup)

        if seq == 0:
            seq = index.last_seq + 1
        self._put_record(seq, encode_record(subject_bytes, headers, payload, seq, ts))
        removed: list[int] = []
        replaced = index.subjects.get(subject) if config.max_msgs_per_subject == 1 else None
        if type(replaced) is int:
            # A KV key with history 1: the new message takes the old one's place in one step, and the
            # index's size of the old record spares reading it back (as `_remove` would).
            replaced = seqs_first(replaced)
            index.replace_single(subject, replaced, self._single_size(subject, replaced), seq, size)
            self._drop_record(replaced)
            removed.append(replaced)
        else:
            index.add(seq, subject, size)
        index.last_seq = seq
        index.last_ts = ts
        if headers and NATS_TTL in headers:
            self._stage_ttl(self._batch, self._ttl, seq, ts, stored_ttl(headers))

        if config.max_msgs_per_subject > 0 and not removed:
            self._enforce_subject_limit(subject, removed)
        if config.max_msgs > 0 or config.max_bytes > 0:
            self._enforce_msg_and_byte_limits(removed)
        if rollup is _ROLLUP_SUBJECT:
            for rolled in rolled_up_subjects(subject, index.subjects):
                entry = index.subjects.get(rolled)
                if entry is not None:
                    for victim in [s for s in seqs_iter(entry) if s < seq]:
                        self._remove(victim)
                        removed.append(victim)
        elif rollup is _ROLLUP_ALL:
            for victim in list(index.live.iter_range(0, seq - 1)):
                self._remove(victim)
                removed.append(victim)
        if (config.max_age_ns > 0 or (self._ttl.active and self._ttl.deadlines)) and config.expires_on_writes:
            # A write's own timestamp is a clock every replica agrees on.
            self._expire(ts, removed)
        return StoreResult(seq, ts, tuple(sorted(removed)) if removed else ())

    def _check_discard_new(self, subject: str, size: int, rollup: Rollup | None) -> None:
        config = self._config
        if config.discard is not _DISCARD_NEW:
            return
        index = self._index
        entry = index.subjects.get(subject)
        at_subject_limit = (
            entry is not None
            and config.max_msgs_per_subject > 0
            and seqs_count(entry) >= config.max_msgs_per_subject
        )
        if at_subject_limit and config.discard_new_per_subject and rollup is None:
            raise LimitExceededError(Limit.MAX_MSGS_PER_SUBJECT)
        # At the per-subject limit the write replaces the subject's oldest message.
        if config.max_msgs > 0 and index.msgs >= config.max_msgs and not at_subject_limit:
            raise LimitExceededError(Limit.MAX_MSGS)
        if config.max_bytes > 0 and index.bytes + size > config.max_bytes:
            if not at_subject_limit:
                raise LimitExceededError(Limit.MAX_BYTES)
            assert entry is not None
            if self._single_size(subject, seqs_first(entry)) < size:
                raise LimitExceededError(Limit.MAX_BYTES)

    def _enforce_subject_limit(self, subject: str, removed: list[int]) -> None:
        limit = self._config.max_msgs_per_subject
        if limit <= 0:
            return
        entry = self._index.subjects.get(subject)
        while entry is not None and seqs_count(entry) > limit:
            first = seqs_first(entry)
            self._remove(first)
            removed.append(first)
            entry = self._index.subjects.get(subject)

    def _enforce_msg_and_byte_limits(self, removed: list[int]) -> None:
        config = self._config
        if config.discard is not _DISCARD_OLD:
            return
        index = self._index
        while config.max_msgs > 0 and index.msgs > config.max_msgs:
            removed.append(index.first_seq)
            self._remove(index.first_seq)
        while config.max_bytes > 0 and index.bytes > config.max_bytes:
            removed.append(index.first_seq)
            self._remove(index.first_seq)

    def _expire(self, now_ns: int, removed: list[int]) -> None:
        for seq in self._due(now_ns, 0):
            self._remove(seq)
            removed.append(seq)

    def _due(self, now_ns: int, limit: int) -> list[int]:
        """Ascending sequences past max_age (never-messages skipped) or past their own TTL."""
        due = self._ttl.due(now_ns) if self._ttl.deadlines else []
        max_age = self._config.max_age_ns
        if max_age > 0:
            cutoff = now_ns - max_age
            live = self._index.live
            never = self._ttl.never
            seq = self._first_aging()
            # the first one's time is cached: a write to a max_age stream asks for it every time
            ts = self._aging_ts(seq) if seq is not None else 0
            aged: list[int] = []
            # Timestamps never decrease along the sequence, so the walk stops at the first young message.
            while seq is not None and ts <= cutoff and not (limit and len(aged) >= limit):
                if seq not in never:
                    aged.append(seq)
                seq = live.next_at_or_after(seq + 1)
                if seq is not None:
                    ts = self._ts_at(seq)
            if not due:
                return aged
            due.extend(aged)
        if len(due) > 1:
            due = sorted(set(due))
        return due[:limit] if limit else due

    def _first_aging(self) -> int | None:
        live = self._index.live
        return self._ttl.first_aging(live.first(), live.next_at_or_after)

    def _aging_ts(self, seq: int) -> int:
        if self._aging_ts_cache[0] != seq:
            self._aging_ts_cache = (seq, self._ts_at(seq))
        return self._aging_ts_cache[1]

    def _remove(self, seq: int) -> bool:
        if seq not in self._index.live:
            return False
        record = self._record(seq)
        _, _, subject_bytes = record_header(record)
        self._index.remove(seq, subject_bytes.decode(), len(record))
        self._drop_record(seq)
        return True

    def _drop_record(self, seq: int) -> None:
        """Delete a message's record and TTL, the index already updated."""
        self._delete_record(seq)
        if seq in self._ttl:
            self._ttl.discard(seq)
            self._batch.delete(self._k(seq), self._ttls_handle)

    def _single_size(self, subject: str, seq: int) -> int:
        """The record size of `seq`, a message of `subject`: from the index while it is the subject's
        only message and its size is known, else read from the record."""
        size = self._index.single_size(subject, seq)
        return len(self._record(seq)) if size is None else size

    def _purge_all(self, first_seq: int) -> int:
        purged = self._index.msgs
        self._batch.delete_range(self._prefix, self._end, self._msgs_handle)
        self._batch.delete_range(self._prefix, self._end, self._ttls_handle)
        self._pending.clear()
        self._index.clear(first_seq - 1)
        self._ttl.clear()
        self._dirty = True
        return purged

    def _compact(self, seq: int) -> int:
        index = self._index
        if seq == 0:
            return self._purge_all(index.last_seq + 1)
        if index.first_seq > seq:
            return 0
        if seq > index.last_seq:
            return self._purge_all(seq)
        victims = list(index.live.iter_range(0, seq - 1))
        for victim in victims:
            self._remove(victim)
        return len(victims)

    def _next_seq_or_mismatch(self, seq: int) -> int:
        check_seq(seq)
        last = self._index.last_seq
        if seq == 0:
            return last + 1
        if seq != last + 1:
            raise SequenceMismatchError(f"sequence {seq} is not the next sequence {last + 1}")
        return seq

    def _next_match(self, filter_: str, start: int) -> int | None:
        return self._index.next_seq(filter_, max(start, 1), self._subject_at)

    def _seq_from_time(self, ts_ns: int) -> int:
        """Same search as MemoryStreamStore._seq_from_time, over the live-sequence bitmap."""
        index = self._index
        live = index.live
        low = live.first()
        if low is None:
            return index.last_seq + 1
        if ts_ns <= self._ts_at(low):
            return low
        high = live.last()
        assert high is not None
        if ts_ns > self._ts_at(high):
            return index.last_seq + 1
        while high - low > 1:
            mid = (low + high) // 2
            probe = live.next_at_or_after(mid)
            assert probe is not None
            if self._ts_at(probe) >= ts_ns:
                high = mid
            else:
                low = mid
        found = live.next_at_or_after(high)
        assert found is not None
        return found

    def _ts_at(self, seq: int) -> int:
        return record_ts(self._record(seq))


__all__ = ["MAX_SEQ", "RocksStreamStore"]


def _with_headers(seq: int, record: bytes) -> tuple[tuple[int, int, bytes], ...]:
    """(seq, ts, headers) of a record that has headers, nothing for one that has none."""
    ts_ns, headers = record_headers(record)
    return () if headers is None else ((seq, ts_ns, headers),)
