"""The lost-unsynced fault: after a kill -9, each write-ahead log is cut back to the node's last fsync.

A writer process (sync points recorded, as chaos runs start nodes) makes synced writes, then unsynced
ones, and is killed: a process crash keeps both (the page cache survives), the fault drops exactly the
unsynced ones, as a power cut may.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

from chaos.run.corruption import drop_unsynced
from raft.rocks_log_storage import RocksLogEngine
from storage.config import StoreConfig
from storage.rocks import RocksStreamStore
from storage.rocks_engine import SYNC_POINTS_ENV, StreamStoreEngine

REPO_ROOT = Path(__file__).resolve().parents[2]
_WRITER = """
import os, signal, sys
from pathlib import Path
from raft.rocks_log_storage import RocksLogEngine
from raft.types import ConfState, Entry
from storage.config import StoreConfig
from storage.rocks import RocksStreamStore
from storage.rocks_engine import StreamStoreEngine
data = Path(sys.argv[1])
synced = int(sys.argv[2])
raft = RocksLogEngine(data / "raft")
group = raft.open_group("g1", conf_state=ConfState(voters=("n1", "n2", "n3")))
streams = StreamStoreEngine(data / "streams.rocks")
store = RocksStreamStore(streams, "s", StoreConfig())
for index in range(1, 101):
    group.append([Entry(term=1, index=index, data=b"x" * 100)])
    raft.persist_blocking(sync=index <= synced)
    with store.write_group(sync=index <= synced):
        store.store_msg("s", None, b"y" * 100, 1_700_000_000_000_000_000 + index)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _crashed_writer(data: Path, record: bool, synced: int = 60) -> None:
    env = (
        {**os.environ, SYNC_POINTS_ENV: "1"}
        if record
        else {k: v for k, v in os.environ.items() if k != SYNC_POINTS_ENV}
    )
    subprocess.run(
        [sys.executable, "-c", _WRITER, str(data), str(synced)],
        cwd=REPO_ROOT,
        env=env,
        check=False,
        timeout=60,
    )


def _reopened(data: Path) -> tuple[int, int]:
    raft = RocksLogEngine(data / "raft")
    streams = StreamStoreEngine(data / "streams.rocks")
    try:
        assert not raft.tail_was_torn
        store = RocksStreamStore(streams, "s", StoreConfig())
        last_seq = store.state().last_seq
        store.close()
        return raft.open_group("g1").last_index(), last_seq
    finally:
        raft.close()
        streams.close()


def test_a_process_crash_keeps_unsynced_writes(tmp_path: Path) -> None:
    _crashed_writer(tmp_path, record=True)
    assert _reopened(tmp_path) == (100, 100)


def test_the_fault_drops_what_was_written_after_the_last_fsync_and_nothing_before(tmp_path: Path) -> None:
    _crashed_writer(tmp_path, record=True)
    effects = drop_unsynced(tmp_path, random.Random(1))
    assert effects and all("(unsynced)" in line for line in effects), effects
    assert _reopened(tmp_path) == (60, 60)


def test_without_recorded_sync_points_the_fault_drops_nothing_and_says_so(tmp_path: Path) -> None:
    _crashed_writer(tmp_path, record=False)
    assert drop_unsynced(tmp_path, random.Random(1)) == ["no sync point recorded"]
    assert _reopened(tmp_path) == (100, 100)


def test_a_database_never_synced_since_it_opened_loses_every_write_since(tmp_path: Path) -> None:
    """Its sync point is the open: what recovery found there is as durable as its files."""
    _crashed_writer(tmp_path, record=True, synced=0)
    drop_unsynced(tmp_path, random.Random(1))
    assert _reopened(tmp_path) == (0, 0)
