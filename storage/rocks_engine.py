"""The node's one RocksDB database for every file-storage stream, and its key layout.

Opening a RocksDB database per stream cost ~8 ms of each stream create, and each
open database kept memtables, a table cache and file handles of its own (1,000
idle streams: ~600 MiB per node). `StreamStoreEngine` opens one database per node
(or per worker process); each `RocksStreamStore` (storage/rocks.py) keeps its keys
under its own prefix in it, as the Raft logs share `raft/rocks_log_storage.py`'s.

Layout, three column families besides `default`, which holds the registry:

    default  b"F"               b"1": the layout version; a database without it that holds
                                messages is a store of the old layout, which is refused
             b"S" name          store id, 8 bytes big-endian: the store exists
             b"N"               the next store id to hand out (ids are never reused)
    msgs     id:8 seq:8         the message record of storage/record.py
    meta     id:8 name          the store's metadata (storage/rocks.py lists the names)
    ttls     id:8 seq:8         a live message's Nats-TTL (storage/rocks.py)

Every key of a store starts with its fixed-width id, so its keys sort by
sequence within the store, and deleting a store is one range delete per column
family (`drop_store`); RocksDB's compaction reclaims the space later.

Writes of different stores go through the one `Rdict`: RocksDB is safe for
concurrent writes, and each store serialises its own writes with its own lock.
`sync()` fsyncs the shared write-ahead log, which makes every write made so far
by any store durable, so two stores syncing at once cannot lose each other's.

A data directory written before this engine (one database per stream under
`streams/<name>`) is migrated into it the first time each store is opened
(storage/rocks_migrate.py).
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from rocksdict import DBRecoveryMode, Options, Rdict, ReadOptions, WriteBatch

from storage.errors import CorruptStoreError, InvalidRequestError, StoreClosedError

MSGS_CF = "msgs"
META_CF = "meta"
TTLS_CF = "ttls"
STORE_ID = struct.Struct(">Q")
_FORMAT_KEY = b"F"
_FORMAT = b"1"
_REGISTRY = b"S"
# the key, after a store's id in the meta family, of what it last applied (storage/rocks.py)
STORE_APPLIED_KEY = b"applied"
_NEXT_ID = b"N"
_MAX_NAME_BYTES = 1024


def rocks_options() -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    # Damage is refused, not worked around: RocksDB's default WAL recovery stops replaying at the first bad
    # record and opens with every later write (synced ones too) silently gone. Only a log that ends inside
    # a record is opened without that record (StreamStoreEngine.tail_was_torn).
    options.set_wal_recovery_mode(DBRecoveryMode.absolute_consistency())
    options.set_paranoid_checks(True)
    return options


def is_torn_tail(exc: Exception) -> bool:
    """RocksDB's refusal (absolute consistency) of a write-ahead log that ends inside a record."""
    text = str(exc)
    return text.startswith("Corruption") and (
        "truncated record body" in text or "encountering EOF" in text or "truncated header" in text
    )


def damage_error(exc: Exception, where: str) -> Exception:
    """rocksdict raises a bare Exception carrying RocksDB's status: a Corruption becomes CorruptStoreError."""
    text = str(exc)
    if text.startswith("Corruption") or "checksum mismatch" in text:
        return CorruptStoreError(f"stream store damaged ({where}): {text}")
    return exc


def read_options() -> ReadOptions:
    options = ReadOptions()
    # RocksDB's default, made explicit: reads skip the record hash because of it.
    options.set_verify_checksums(True)
    return options


# Test hook for the chaos fault lost-unsynced: where the write-ahead log stood at its last fsync. With
# JETRAFT_RECORD_SYNC_POINTS=1 in its environment, a node writes, after every fsync of this database's WAL,
# the newest log file's name and size to SYNC-POINT in the database directory (a plain write, no fsync: the
# fault is a kill -9, which keeps the page cache). raft/sync_point.py is the same for the Raft logs.
SYNC_POINTS_ENV = "JETRAFT_RECORD_SYNC_POINTS"
SYNC_POINT_FILE = "SYNC-POINT"


def sync_points_recorded() -> bool:
    return os.environ.get(SYNC_POINTS_ENV) == "1"


def record_sync_point(db_dir: Path) -> None:
    """After an fsync of the WAL: the newest `*.log` and its size, to `SYNC-POINT`."""
    logs = sorted(entry.name for entry in os.scandir(db_dir) if entry.name.endswith(".log"))
    if not logs:
        return
    size = os.stat(db_dir / logs[-1]).st_size
    tmp = db_dir / (SYNC_POINT_FILE + ".tmp")
    tmp.write_text(f"{logs[-1]} {size}\n")
    os.replace(tmp, db_dir / SYNC_POINT_FILE)


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with the fixed-width `prefix`."""
    return STORE_ID.pack(STORE_ID.unpack(prefix)[0] + 1)


class AttachedStore(Protocol):
    """A store open on the engine, as the engine sees it: closed with the engine if still open."""

    def close(self) -> None: ...


class StreamStoreEngine:
    """One RocksDB database holding every file-storage stream store of a node.

    `legacy_root`: where the per-stream databases of the old layout live
    (`data_dir/streams`); a store found there is moved into this database when
    it is first opened.
    """

    def __init__(self, path: str | Path, *, legacy_root: str | Path | None = None) -> None:
        self._path = Path(path)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self.legacy_root = Path(legacy_root) if legacy_root is not None else None
        self._lock = threading.Lock()
        self._closed = False
        self._open: dict[str, AttachedStore] = {}
        self._damage_seen: str | None = None
        # Whether the write-ahead log ended in an incomplete record, dropped at open: a kill -9 in the middle
        # of a large write leaves one. What a store loses that way it had not synced, or its Raft log holds
        # it: its applied index goes back with it, in the same write group, and the entries apply again.
        self.tail_was_torn = False
        try:
            self.db = self._open_db(DBRecoveryMode.absolute_consistency())
        except Exception as exc:
            if not is_torn_tail(exc):
                raise damage_error(exc, f"opening {self._path}") from exc
            try:
                self.db = self._open_db(DBRecoveryMode.tolerate_corrupted_tail_records())
            except Exception as again:
                raise damage_error(again, f"opening {self._path}") from again
            self.tail_was_torn = True
        self.db.set_read_options(read_options())
        self.msgs_cf = self.db.get_column_family(MSGS_CF)
        self.msgs_handle = self.db.get_column_family_handle(MSGS_CF)
        self.meta_cf = self.db.get_column_family(META_CF)
        self.meta_handle = self.db.get_column_family_handle(META_CF)
        self.ttls_cf = self.db.get_column_family(TTLS_CF)
        self.ttls_handle = self.db.get_column_family_handle(TTLS_CF)
        for cf in (self.msgs_cf, self.meta_cf, self.ttls_cf):
            cf.set_read_options(read_options())
        # what recovery found is as durable as the files it came from: the first sync point is the open
        self._record_sync_points = sync_points_recorded()
        if self._record_sync_points:
            record_sync_point(self._path)
        try:
            self._check_format()
        except BaseException:
            self._release()
            raise

    def _open_db(self, wal_recovery: DBRecoveryMode) -> Rdict:
        options = rocks_options()
        options.set_wal_recovery_mode(wal_recovery)
        return Rdict(
            str(self._path),
            options,
            column_families={MSGS_CF: rocks_options(), META_CF: rocks_options(), TTLS_CF: rocks_options()},
        )

    def _check_format(self) -> None:
        stored = self.db.get(_FORMAT_KEY)
        if stored == _FORMAT:
            return
        if stored is not None:
            raise CorruptStoreError(f"unknown stream store engine format {stored!r} in {self._path}")
        if (
            next(iter(self.msgs_cf.keys()), None) is not None
            or next(iter(self.meta_cf.keys()), None) is not None
        ):
            # Its keys have no store id: read as this layout they would be misread, not refused.
            raise CorruptStoreError(
                f"{self._path} is one stream's database of the old layout: "
                "open it through the engine's legacy_root, which migrates it"
            )
        self.db.put(_FORMAT_KEY, _FORMAT)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def damage_seen(self) -> str | None:
        """Damage a read met while the node ran (None: none): the node is not clean, and says so."""
        return self._damage_seen

    def note_damage(self, what: str) -> None:
        with self._lock:
            if self._damage_seen is None:
                self._damage_seen = what

    @property
    def closed(self) -> bool:
        return self._closed

    # -- stores ------------------------------------------------------------------------

    def stores(self) -> list[str]:
        """Names of the stores this database holds, open or not."""
        with self._lock:
            self._check_open()
            return [key[1:].decode() for key, _ in self.scan(self.db, _REGISTRY, b"T")]

    def stored_metadata(self, name: str) -> bytes | None:
        """The metadata store `name` last wrote with its applied entries (its owner's format), read
        without opening it; None for a store that has none or does not exist."""
        with self._lock:
            self._check_open()
            prefix = self.db.get(_REGISTRY + name.encode())
            if prefix is None:
                return None
            return self.meta_cf.get(prefix + STORE_APPLIED_KEY)

    def holds(self, name: str) -> bool:
        """Whether opening store `name` finds anything to read: it is registered here, or an old-layout
        database of that name waits under `legacy_root` to be moved in."""
        with self._lock:
            self._check_open()
            if self.db.get(_REGISTRY + name.encode()) is not None:
                return True
        return self.legacy_root is not None and (self.legacy_root / name).exists()

    def attach(
        self, name: str, store: AttachedStore, on_create: Callable[[bytes, WriteBatch], None] | None = None
    ) -> bytes:
        """Register `store` as the open store `name` (created if new); returns its key prefix.

        A name is open at most once at a time: two stores writing one key range would
        each trust an in-memory index the other is invalidating. When the name is new,
        `on_create(prefix, batch)` may add the store's first records to the batch that
        registers it (one write, atomic with the registration).
        """
        encoded = name.encode()
        if not encoded or len(encoded) > _MAX_NAME_BYTES:
            raise InvalidRequestError(f"store name {name!r} must be 1..{_MAX_NAME_BYTES} bytes")
        with self._lock:
            self._check_open()
            if name in self._open:
                raise InvalidRequestError(f"stream store {name!r} is already open")
            prefix = self.db.get(_REGISTRY + encoded)
            if prefix is None:
                prefix = self._allocate(encoded, on_create)
            self._open[name] = store
            return prefix

    def _allocate(
        self, encoded_name: bytes, on_create: Callable[[bytes, WriteBatch], None] | None = None
    ) -> bytes:
        """A fresh id for a new store, registered in one write with the counter (and the store's first
        records, if `on_create` stages any). Ids are never reused, so nothing is stored under it yet."""
        next_id = self.db.get(_NEXT_ID)
        store_id = STORE_ID.unpack(next_id)[0] if next_id is not None else 1
        prefix = STORE_ID.pack(store_id)
        batch = WriteBatch(raw_mode=True)
        batch.put(_REGISTRY + encoded_name, prefix)
        batch.put(_NEXT_ID, STORE_ID.pack(store_id + 1))
        if on_create is not None:
            on_create(prefix, batch)
        self.db.write(batch)
        return prefix

    def detach(self, name: str) -> None:
        """The store `name` was closed (its data stays)."""
        with self._lock:
            self._open.pop(name, None)

    def is_open(self, name: str) -> bool:
        with self._lock:
            return name in self._open

    def drop_store(self, name: str) -> None:
        """Delete everything stored for the closed store `name`: one range delete per column family."""
        encoded = name.encode()
        with self._lock:
            self._check_open()
            if name in self._open:
                raise InvalidRequestError(f"stream store {name!r} is open: close it before deleting it")
            prefix = self.db.get(_REGISTRY + encoded)
            if prefix is None:
                return
            end = prefix_end(prefix)
            batch = WriteBatch(raw_mode=True)
            for handle in (self.msgs_handle, self.meta_handle, self.ttls_handle):
                batch.delete_range(prefix, end, handle)
            batch.delete(_REGISTRY + encoded)
            self.db.write(batch)

    def sync(self) -> None:
        """Fsync the write-ahead log: every write of every store made so far is durable."""
        self._check_open()
        self.db.flush_wal(True)
        if self._record_sync_points:
            record_sync_point(self._path)

    @staticmethod
    def scan(cf: Rdict, start: bytes, end: bytes) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) of `cf` from `start` up to `end` (excluded), in key order."""
        options = read_options()
        options.set_iterate_upper_bound(end)
        it = cf.iter(options)
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
            raise damage_error(exc, "scanning") from exc

    def verify(self) -> None:
        """Read every key and value of the database, so RocksDB checks every block's checksum; raises
        CorruptStoreError at the first damage. What a kill -9 leaves is checked this way at start."""
        with self._lock:
            self._check_open()
            for cf in (self.db, self.msgs_cf, self.meta_cf, self.ttls_cf):
                for _ in self.scan(cf, b"", b"\xff" * 17):
                    pass

    def close(self) -> None:
        """Close every store still open (cleanly, saving its index), flush and close the database."""
        with self._lock:
            if self._closed:
                return
            still_open = list(self._open.values())
        failures: list[Exception] = []
        for store in still_open:
            try:
                store.close()
            except Exception as exc:  # the others and the database are closed all the same
                failures.append(exc)
        with self._lock:
            self._closed = True
            self._open.clear()
            try:
                # Flushing the memtables now saves replaying the WAL on the next open.
                for cf in (self.msgs_cf, self.meta_cf, self.ttls_cf):
                    cf.flush()
            finally:
                self._release()
        if failures:
            raise failures[0]

    def abandon(self) -> None:
        """Close the database as a crash would leave it: no store saves anything (tests)."""
        with self._lock:
            self._closed = True
            self._open.clear()
            self._release()

    def _release(self) -> None:
        # rocksdict keeps the database open while any column family object lives.
        del self.msgs_cf, self.msgs_handle, self.meta_cf, self.meta_handle, self.ttls_cf, self.ttls_handle
        self.db.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("stream store engine is closed")


__all__ = [
    "META_CF",
    "MSGS_CF",
    "STORE_ID",
    "SYNC_POINTS_ENV",
    "SYNC_POINT_FILE",
    "TTLS_CF",
    "AttachedStore",
    "StreamStoreEngine",
    "damage_error",
    "prefix_end",
]
