"""A node's start with damaged files (cluster/node/damage.py): set aside, fresh ones opened, recovering."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from cluster.node.damage import DAMAGED_DIR, mark_clean_stop, open_node_state
from cluster.stream.assignment import StreamAssignment
from cluster.stream.replica import store_name_for
from raft.recovery import LEDGER_FILE, RecoveryLedger
from raft.types import ConfState, Entry, HardState
from storage.rocks_engine import STORE_APPLIED_KEY

VOTERS = ConfState(voters=("n1", "n2", "n3"))
REPO_ROOT = Path(__file__).resolve().parents[2]


def _node_with_a_group(data_dir: Path) -> None:
    state = open_node_state(data_dir)
    storage = state.raft.open_group("g1", conf_state=VOTERS)
    storage.append([Entry(term=1, index=i) for i in range(1, 6)])
    storage.set_hard_state(HardState(term=1, vote="n1", commit=5))
    state.raft.persist_blocking()
    state.raft.close()
    state.streams.close()


def test_intact_files_open_as_they_are(tmp_path: Path) -> None:
    _node_with_a_group(tmp_path)
    state = open_node_state(tmp_path)
    try:
        assert state.damage is None and state.recovery is None
        assert state.raft.groups() == ["g1"]
    finally:
        state.raft.close()
        state.streams.close()


def test_damaged_files_are_set_aside_and_every_group_recovers(tmp_path: Path) -> None:
    _node_with_a_group(tmp_path)
    state = open_node_state(tmp_path)
    storage = state.raft.open_group("g1")
    state.raft._db.delete(storage._entry_key(5))  # the log now ends before its commit index
    state.raft.close()
    state.streams.close()

    state = open_node_state(tmp_path)
    try:
        assert state.damage is not None and "before its commit index" in state.damage
        assert state.raft.groups() == []  # fresh: the peers will send everything
        assert state.recovery is not None and state.recovery.recovering("g1")
        (set_aside,) = (tmp_path / DAMAGED_DIR).iterdir()
        assert (set_aside / "raft").is_dir() and (set_aside / "streams.rocks").is_dir()
        state.recovery.caught_up("g1")
    finally:
        state.raft.close()
        state.streams.close()
    mark_clean_stop(tmp_path)

    # the ledger outlives a restart: only the groups struck off it vote again
    state = open_node_state(tmp_path)
    try:
        assert state.damage is None and (tmp_path / LEDGER_FILE).exists()
        assert state.recovery is not None
        assert not state.recovery.recovering("g1") and state.recovery.recovering("g2")
    finally:
        state.raft.close()
        state.streams.close()


def test_the_ledger_is_done_once_every_running_group_caught_up_and_retires_for_good(tmp_path: Path) -> None:
    ledger = RecoveryLedger.begin(tmp_path, "test")
    ledger.caught_up("_meta_")
    assert ledger.done(["_meta_"]) and not ledger.done(["_meta_", "S-a"])
    ledger.retire()
    assert RecoveryLedger.load(tmp_path) is None


_TORN_WRITER = """
import os, signal, sys
from pathlib import Path
from cluster.node.damage import open_node_state
from raft.types import ConfState, Entry, HardState
state = open_node_state(Path(sys.argv[1]))
storage = state.raft.open_group("g1", conf_state=ConfState(voters=("n1", "n2", "n3")))
storage.append([Entry(term=1, index=i, data=b"x" * 100) for i in range(1, 6)])
storage.set_hard_state(HardState(term=1, vote="n1", commit=5))
state.raft.persist_blocking(sync=True)
storage.append([Entry(term=1, index=i, data=os.urandom(3000)) for i in range(6, 9)])
state.raft.persist_blocking(sync=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_raft_log_torn_in_its_last_write_keeps_everything_before_it(tmp_path: Path) -> None:
    """A kill -9 or a power cut in the middle of the last write leaves its record incomplete; that record's
    fsync never returned, so nothing in it was acknowledged. The node must keep everything else, not set
    its files aside: a one-node cluster would come back empty, and a cluster whose every node lost power
    would come back with no member able to vote."""
    subprocess.run([sys.executable, "-c", _TORN_WRITER, str(tmp_path)], cwd=REPO_ROOT, check=False, timeout=60)
    (wal,) = sorted((tmp_path / "raft").glob("*.log"), key=lambda p: p.stat().st_mtime)[-1:]
    with open(wal, "r+b") as f:
        f.truncate(wal.stat().st_size - 1000)  # inside the last record, the three 3,000-byte entries
    state = open_node_state(tmp_path)
    try:
        assert state.damage is None and state.recovery is None
        assert not (tmp_path / DAMAGED_DIR).exists()
        assert state.raft.open_group("g1").last_index() == 5
    finally:
        state.raft.close()
        state.streams.close()


class _NoStore:
    def close(self) -> None:
        pass


def test_a_store_that_applied_past_the_end_of_its_raft_log_is_damage(tmp_path: Path) -> None:
    """A cut inside the Raft log's synced records that still reaches the commit index it wrote passes the
    log's own check; but the stream store had applied entries the log no longer holds. The group could not
    start (its applied index beyond its log), so its replica would never serve: the node repairs instead."""
    state = open_node_state(tmp_path)
    storage = state.raft.open_group("S-ORDERS-17", conf_state=VOTERS)
    storage.append([Entry(term=1, index=i) for i in range(1, 6)])
    storage.set_hard_state(HardState(term=1, vote="n1", commit=5))
    state.raft.persist_blocking()
    prefix = state.streams.attach("ORDERS-17", _NoStore())
    state.streams.meta_cf.put(prefix + STORE_APPLIED_KEY, orjson.dumps({"applied": 5}))
    state.streams.detach("ORDERS-17")
    # the log loses its last two entries, and the commit index that covered them, as a cut WAL would
    for index in (4, 5):
        state.raft._db.delete(storage._entry_key(index))
    storage.set_hard_state(HardState(term=1, vote="n1", commit=3))
    state.raft.persist_blocking()
    state.raft.close()
    state.streams.close()

    state = open_node_state(tmp_path)
    try:
        assert state.damage is not None and "beyond the end of its raft log at 3" in state.damage
        assert state.raft.groups() == [] and state.streams.stores() == []
        assert state.recovery is not None and state.recovery.recovering("S-ORDERS-17")
    finally:
        state.raft.close()
        state.streams.close()


def test_a_store_within_its_log_and_one_without_a_group_are_left_alone(tmp_path: Path) -> None:
    state = open_node_state(tmp_path)
    storage = state.raft.open_group("B/S-ORDERS-17", conf_state=VOTERS)
    storage.append([Entry(term=1, index=i) for i in range(1, 6)])
    storage.set_hard_state(HardState(term=1, vote="n1", commit=5))
    state.raft.persist_blocking()
    for name, applied in (("B/ORDERS-17", 5), ("GONE-9", 40)):  # GONE's group was dropped before its store
        prefix = state.streams.attach(name, _NoStore())
        state.streams.meta_cf.put(prefix + STORE_APPLIED_KEY, orjson.dumps({"applied": applied}))
        state.streams.detach(name)
    state.raft.close()
    state.streams.close()

    state = open_node_state(tmp_path)
    try:
        assert state.damage is None and state.recovery is None
        assert sorted(state.streams.stores()) == ["B/ORDERS-17", "GONE-9"]
    finally:
        state.raft.close()
        state.streams.close()


def test_a_stores_group_is_found_from_its_name() -> None:
    for tag in ("", "B/"):
        assignment = StreamAssignment("ORDERS", {}, ["n1"], 17, tag=tag)
        assert StreamAssignment.group_of_store(store_name_for(assignment)) == assignment.group
