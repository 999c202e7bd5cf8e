"""Moving a stream store of the old layout (one RocksDB database per stream) into the node's engine.

Before storage/rocks_engine.py, each file-storage replica had its own database
in `data_dir/streams/<name>`, with the column families and keys of today's
layout minus the store-id prefix. The first time such a store is opened, its
keys are copied under the store's prefix in the engine, the shared WAL is
fsynced, and only then is the old directory renamed aside (an atomic step,
made durable by fsyncing its parent) and removed.

Every step before the rename can be cut off by a crash: the old directory is
still there, so the next open starts the copy again from the beginning (it
first deletes whatever an earlier attempt left under the prefix). A directory
renamed aside but not yet removed is removed on the next open.

The saved index is not copied (it was stamped with the old database's sequence
number): the migrated store reads its records once on its first open.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from rocksdict import Rdict, WriteBatch

from storage.rocks_engine import META_CF, MSGS_CF, TTLS_CF, StreamStoreEngine, prefix_end, rocks_options

# Keys copied per batch: bounds the memory a large store's migration takes.
_COPY_BATCH = 10_000
_SKIPPED_META = frozenset({b"index"})
_ASIDE_SUFFIX = ".migrated"


def migrate_legacy_store(engine: StreamStoreEngine, legacy_dir: Path, prefix: bytes) -> bool:
    """Copy the old-layout store at `legacy_dir`, if there is one, under `prefix`; True if it did."""
    aside = legacy_dir.with_name(legacy_dir.name + _ASIDE_SUFFIX)
    if aside.exists():
        shutil.rmtree(aside, ignore_errors=True)
    if not (legacy_dir / "CURRENT").is_file():
        return False
    families = {MSGS_CF: rocks_options(), META_CF: rocks_options(), TTLS_CF: rocks_options()}
    old = Rdict(str(legacy_dir), rocks_options(), column_families=families)
    try:
        _copy(engine, old, prefix)
    finally:
        old.close()
    engine.sync()
    os.rename(legacy_dir, aside)
    _fsync_dir(legacy_dir.parent)
    shutil.rmtree(aside, ignore_errors=True)
    return True


def _copy(engine: StreamStoreEngine, old: Rdict, prefix: bytes) -> None:
    batch = WriteBatch(raw_mode=True)
    end = prefix_end(prefix)
    # what an earlier, interrupted attempt wrote
    for handle in (engine.msgs_handle, engine.meta_handle, engine.ttls_handle):
        batch.delete_range(prefix, end, handle)
    staged = 0
    for family, handle in ((MSGS_CF, engine.msgs_handle), (TTLS_CF, engine.ttls_handle), (META_CF, engine.meta_handle)):
        cf = old.get_column_family(family)
        try:
            for key, value in cf.items():
                if family == META_CF and key in _SKIPPED_META:
                    continue
                batch.put(prefix + key, value, handle)
                staged += 1
                if staged == _COPY_BATCH:
                    engine.db.write(batch)
                    batch = WriteBatch(raw_mode=True)
                    staged = 0
        finally:
            del cf
    engine.db.write(batch)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
