"""Open a node's Raft logs and stream stores; if they are damaged, set them aside and start recovering.

RocksDB checks every block and write-ahead-log record against its checksum; the
engines open with the strict settings (raft/rocks_log_storage.py,
storage/rocks_engine.py), so a flipped bit or a cut log is an error, never a
quietly shorter log. What is checked here, at start:

- opening both databases (a damaged WAL, MANIFEST, table footer or index). A
  write-ahead log that merely ends inside a record (a kill -9 or a power cut
  during a write leaves one) is opened without that record, which was never
  synced, so never acknowledged: a stream store replays what it loses from its
  Raft log, and the Raft log loses nothing it promised. A log cut short inside
  synced records looks the same and is caught only if it lost entries below
  its commit index (next point);
- every Raft group's log, read whole (`RocksLogEngine.verify`): its blocks, no
  hole, no log ending before the commit index it wrote;
- every stream store against its group's log: a store that applied past the end
  of the log shows the log lost synced entries even where it still reaches the
  commit index it wrote (a cut that took the commit index's own update with it);
- every stream store's blocks (`StreamStoreEngine.verify`), unless the node
  stopped cleanly last time (`CLEAN_STOP`): that read costs as much as the data,
  and a clean stop leaves nothing half written. Damage found later, on a read,
  is answered as an error, never as data (cluster/stream/msg_get.py,
  cluster/direct_get/answer.py).

A damaged node cannot tell what it lost: the two databases go together (each
store's applied index refers to its Raft log) into `damaged/<time>/` for a
post-mortem, empty ones replace them, and the recovery ledger
(raft/recovery.py) keeps every group from voting until a leader has caught it
up. Its peers then send it everything, as to a new replica. The damage and
where the files went are logged (`node_files_damaged`).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

import structlog

from cluster.stream.assignment import StreamAssignment
from cluster.stream.machine import applied_in_metadata
from raft.recovery import RecoveryLedger
from raft.rocks_log_storage import RaftLogDamagedError, RocksLogEngine
from storage.errors import CorruptStoreError
from storage.rocks_engine import StreamStoreEngine

log = structlog.get_logger(__name__)

RAFT_DIR = "raft"
STREAMS_DB = "streams.rocks"
LEGACY_STREAMS_DIR = "streams"
DAMAGED_DIR = "damaged"
# Written after both databases closed cleanly, removed as the node opens them.
CLEAN_STOP = "clean-stop"


@dataclass
class NodeState:
    raft: RocksLogEngine
    streams: StreamStoreEngine
    # set while the node recovers from damaged files (or from a crash in the middle of that)
    recovery: RecoveryLedger | None
    # what was found damaged at this start, if anything
    damage: str | None = None


def open_node_state(data_dir: Path) -> NodeState:
    data_dir.mkdir(parents=True, exist_ok=True)
    clean = _take_clean_stop(data_dir)
    try:
        state = _open_checked(data_dir, verify_streams=not clean)
    except (RaftLogDamagedError, CorruptStoreError) as exc:
        reason = str(exc)
        moved = _set_aside(data_dir)
        log.error("node_files_damaged", data_dir=str(data_dir), damage=reason, moved_to=str(moved))
        ledger = RecoveryLedger.begin(data_dir, reason)
        state = _open_checked(data_dir, verify_streams=False)
        state.recovery = ledger
        state.damage = reason
        return state
    state.recovery = RecoveryLedger.load(data_dir)
    return state


def mark_clean_stop(data_dir: Path) -> None:
    """Both databases closed cleanly: the next start may skip reading every stream store."""
    path = data_dir / CLEAN_STOP
    path.write_bytes(b"")
    _fsync_dir(data_dir)


def _take_clean_stop(data_dir: Path) -> bool:
    path = data_dir / CLEAN_STOP
    if not path.exists():
        return False
    path.unlink()
    _fsync_dir(data_dir)  # a crash from here on must not pass for a clean stop
    return True


def _open_checked(data_dir: Path, *, verify_streams: bool) -> NodeState:
    raft = RocksLogEngine(data_dir / RAFT_DIR)
    try:
        if raft.tail_was_torn:
            # What a kill -9 or a power cut in the middle of a write leaves: the record's fsync had not
            # returned, so nothing in it was acknowledged, voted or applied (the driver sends and applies
            # a Ready only once its write is on disk). Setting the node's files aside for it would empty
            # a one-node cluster, and leave a cluster whose every node lost power with no member able to
            # vote. A log cut short inside synced records looks the same; `verify` still refuses one
            # that lost entries below its commit index.
            log.warning("raft_log_tail_torn", data_dir=str(data_dir))
        last_indexes = raft.verify()
        # Without an old-layout directory at start there is nothing to migrate, ever (nothing writes that
        # layout any more), so no store open looks for one (three stats of a path per stream create).
        legacy = data_dir / LEGACY_STREAMS_DIR
        streams = StreamStoreEngine(data_dir / STREAMS_DB, legacy_root=legacy if legacy.is_dir() else None)
    except BaseException:
        raft.close()
        raise
    try:
        if verify_streams:
            streams.verify()
        _check_stores_against_logs(streams, last_indexes)
    except BaseException:
        raft.close()
        streams.abandon()
        raise
    return NodeState(raft, streams, None)


def _check_stores_against_logs(streams: StreamStoreEngine, last_indexes: dict[str, int]) -> None:
    """A stream store applies only entries its Raft log holds durably: one that applied past the end of
    its group's log shows that log lost synced entries, which a cut inside synced records can do while
    still reaching the commit index it wrote (the group would otherwise fail to start, its replica never
    serving). A store whose group is gone (a delete interrupted between the two) is not judged here."""
    for name in streams.stores():
        last = last_indexes.get(StreamAssignment.group_of_store(name))
        meta = streams.stored_metadata(name) if last is not None else None
        applied = applied_in_metadata(meta) if meta is not None else None
        if last is not None and applied is not None and applied > last:
            raise RaftLogDamagedError(
                f"stream store {name!r} applied entry {applied}, beyond the end of its raft log at {last}"
            )


def _set_aside(data_dir: Path) -> Path:
    """Move the node's databases out of the way (kept for a post-mortem); returns where they went."""
    target = data_dir / DAMAGED_DIR / time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    suffix = 0
    while target.exists():
        suffix += 1
        target = target.with_name(f"{target.name.split('.')[0]}.{suffix}")
    target.mkdir(parents=True)
    for name in (RAFT_DIR, STREAMS_DB, LEGACY_STREAMS_DIR):
        source = data_dir / name
        if source.exists():
            os.replace(source, target / name)
    _fsync_dir(data_dir)
    return target


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


__all__ = ["CLEAN_STOP", "NodeState", "mark_clean_stop", "open_node_state"]
