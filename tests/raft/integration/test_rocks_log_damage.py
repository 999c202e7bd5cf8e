"""A damaged Raft-log database is refused (RaftLogDamagedError), never opened as a shorter log.

The writes are made by a child process killed with SIGKILL after they were
synced, so the write-ahead log is their only copy, as after a crash. RocksDB's
default recovery (point in time) opened such a log cut short without a word,
with acknowledged entries gone; its iterators stop at a damaged block as if the
data ended there.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.run.corruption import flip_bits, truncate_logs
from raft.rocks_log_storage import RaftLogDamagedError, RocksLogEngine
from raft.types import ConfState, Entry, HardState

REPO_ROOT = Path(__file__).resolve().parents[3]
VOTERS = ConfState(voters=("n1", "n2", "n3"))
_WRITER = """
import os, signal, sys
from raft.rocks_log_storage import RocksLogEngine
from raft.types import ConfState, Entry, HardState
engine = RocksLogEngine(sys.argv[1])
storage = engine.open_group("g1", conf_state=ConfState(voters=("n1", "n2", "n3")))
for first in range(1, 400, 20):
    storage.append([Entry(term=1, index=i, data=os.urandom(200)) for i in range(first, first + 20)])
    storage.set_hard_state(HardState(term=1, vote="n1", commit=first - 1))
    engine.persist_blocking(sync=True)
if sys.argv[2] == "flush":
    engine._db.flush()
os.kill(os.getpid(), signal.SIGKILL)
"""


def _write_and_crash(path: Path, flush: bool) -> None:
    # (not opened here: opening replays the write-ahead log into a table, and the damage is meant for the log)
    subprocess.run(
        [sys.executable, "-c", _WRITER, str(path), "flush" if flush else "wal"],
        cwd=REPO_ROOT,
        check=False,
        timeout=60,
    )


def _open_and_read_all(path: Path) -> int:
    engine = RocksLogEngine(path)
    try:
        engine.verify()
        return engine.open_group("g1").last_index()
    finally:
        engine.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_write_ahead_log_cut_short_is_never_opened_silently(tmp_path: Path, seed: int) -> None:
    """A cut inside a record looks like a write torn by a kill -9: opened without it, but said so
    (`tail_was_torn`, which makes the node recover its groups); RocksDB's default said nothing."""
    path = tmp_path / "raft"
    _write_and_crash(path, flush=False)
    assert truncate_logs(path, random.Random(seed))
    try:
        engine = RocksLogEngine(path)
    except RaftLogDamagedError:
        return
    try:
        assert engine.tail_was_torn
        assert engine.open_group("g1").last_index() < 400
    finally:
        engine.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_flipped_bits_in_tables_are_refused(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "raft"
    _write_and_crash(path, flush=True)
    assert any(p.suffix == ".sst" for p in path.iterdir())
    rng = random.Random(seed)
    # only the tables: every byte of one is covered by a block checksum, the footer's or a block's
    for log in path.glob("*.log"):
        log.rename(log.with_suffix(".keep"))
    flip_bits(path, rng, flips=4)
    for log in path.glob("*.keep"):
        log.rename(log.with_suffix(".log"))
    with pytest.raises(RaftLogDamagedError):
        _open_and_read_all(path)


def test_a_log_ending_before_its_commit_index_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "raft"
    engine = RocksLogEngine(path)
    storage = engine.open_group("g1", conf_state=VOTERS)
    storage.append([Entry(term=1, index=i) for i in range(1, 6)])
    storage.set_hard_state(HardState(term=1, vote="n1", commit=5))
    engine.persist_blocking()
    for index in (4, 5):  # gone, as entries past a cut in the write-ahead log would be
        engine._db.delete(storage._entry_key(index))
    engine.close()
    with pytest.raises(RaftLogDamagedError, match="before its commit index 5"):
        _open_and_read_all(path)


def test_an_intact_log_after_a_crash_opens_whole(tmp_path: Path) -> None:
    path = tmp_path / "raft"
    _write_and_crash(path, flush=False)
    assert _open_and_read_all(path) == 400
    engine = RocksLogEngine(path)
    try:
        assert not engine.tail_was_torn
    finally:
        engine.close()
