"""Test hook: where a RocksDB database's write-ahead log stood at its last fsync (chaos `lost-unsynced`).

With `JETRAFT_RECORD_SYNC_POINTS=1` in its environment, a node writes, after
every fsync of a database's write-ahead log, the newest log file's name and
size to `SYNC-POINT` in the database directory (a plain write, no fsync: the
fault it serves is a kill -9, which keeps the page cache). Cutting each log
back to that point after a kill -9 drops exactly what the node wrote but had
not synced, as a power cut may. `storage/rocks_engine.py` has the same for the stream
stores (raft and storage do not import each other).
"""

from __future__ import annotations

import os
from pathlib import Path

SYNC_POINTS_ENV = "JETRAFT_RECORD_SYNC_POINTS"
SYNC_POINT_FILE = "SYNC-POINT"


def recording() -> bool:
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
