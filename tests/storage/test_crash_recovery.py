"""Crash recovery: a real writer process (tests/storage/crash_writer.py) is killed with SIGKILL.

After each kill the store is reopened and compared with a memory store (counting bytes as files do)
that replayed exactly the groups the reopened store's metadata names: same
state (messages, bytes, first/last sequence and time, subjects, deleted
sequences) and the same message at every sequence. So the store holds a whole
number of write groups, no torn one, and its metadata agrees with its
messages. Every acknowledged group must be there: with `sync` because it was
fsynced, without it because a process crash (the OS living on) keeps what
RocksDB handed to the kernel before the write returned.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage.errors import MsgNotFoundError
from storage.rocks import RocksStreamStore
from storage.rocks_engine import StreamStoreEngine
from tests.storage.crash_writer import applied_group, config_for, shared_store_name, write_group
from tests.storage.oracle import FileCountingMemoryStore

REPO_ROOT = Path(__file__).resolve().parents[2]
KILLS_PER_RUN = 3
WRITER_SECONDS = 20.0
# About the time the writer takes for one group of MAX_GROUP messages.
MAX_KILL_DELAY_S = 0.03


def run_writer_until_killed(
    path: Path, mode: str, acks_before_kill: int, kill_delay_s: float
) -> tuple[int, int]:
    """Starts the writer and kills it `kill_delay_s` after its `acks_before_kill`th ack; returns
    (group it resumed after, last acknowledged group), counting acks it printed before dying."""
    writer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.storage.crash_writer",
            str(path),
            mode,
            "--seconds",
            str(WRITER_SECONDS),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    try:
        opened = writer.stdout.readline().split()
        assert opened[:1] == ["open"], f"writer did not start: {opened}"
        resumed_after = int(opened[1])
        acked = resumed_after
        for _ in range(acks_before_kill):
            line = writer.stdout.readline().split()
            # A line that is not an ack means the writer ran to its deadline or failed.
            assert line[:1] == ["ack"], f"writer stopped before the kill: {line}"
            acked = int(line[1])
        # Not waiting for anything: the delay picks where in the next group(s) the kill lands.
        # Killed at once, the writer would always die between groups, before its next write.
        time.sleep(kill_delay_s)
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=10)
        for rest in writer.stdout.read().splitlines():
            fields = rest.split()
            assert fields[0] == "ack", f"unexpected writer output {rest!r}"
            acked = int(fields[1])
    finally:
        if writer.poll() is None:
            os.kill(writer.pid, signal.SIGKILL)
            writer.wait(timeout=10)
        writer.stdout.close()
    assert writer.returncode == -signal.SIGKILL
    return resumed_after, acked


def assert_matches_replay(store: RocksStreamStore, mode: str) -> int:
    """Compares `store` with a memory replay of the groups its metadata names; returns that group."""
    groups = applied_group(store)
    oracle = FileCountingMemoryStore(config_for(mode))
    for group in range(1, groups + 1):
        write_group(oracle, group, sync=False)
    state = store.state(include_deleted=True)
    assert state == oracle.state(include_deleted=True)
    assert store.subjects_state(">") == oracle.subjects_state(">")
    for seq in range(1, state.last_seq + 1):
        try:
            expected = oracle.load_msg(seq)
        except MsgNotFoundError:
            with pytest.raises(MsgNotFoundError):
                store.load_msg(seq)
        else:
            # load_msg checks each record's hash too, so a damaged body fails here.
            assert store.load_msg(seq) == expected
    return groups


@pytest.mark.parametrize("mode", ["sync", "nosync"])
def test_killed_writer_leaves_whole_acknowledged_groups(mode: str, tmp_path: Path, fast_dir: Path) -> None:
    # `sync` runs on the real disk so its fsyncs are real; `nosync` on tmpfs when there is one.
    path = (tmp_path if mode == "sync" else fast_dir) / "store"
    choices = random.Random(f"crash-{mode}")
    recovered = 0
    for _ in range(KILLS_PER_RUN):
        resumed_after, acked = run_writer_until_killed(
            path, mode, choices.randint(3, 25), choices.uniform(0, MAX_KILL_DELAY_S)
        )
        assert resumed_after == recovered, "the writer resumed elsewhere than the reopened store"
        store = RocksStreamStore.open_alone(path)
        try:
            recovered = assert_matches_replay(store, mode)
        finally:
            store.close()
        assert recovered >= acked, f"acknowledged group {acked} lost, store holds {recovered}"

    store = RocksStreamStore.open_alone(path)
    try:
        last_seq = store.state().last_seq
        assert last_seq > 0
        result = store.store_msg("crash.after", None, b"written after recovery")
        assert result.seq == last_seq + 1
        store.sync()
    finally:
        store.close()
    reopened = RocksStreamStore.open_alone(path)
    try:
        assert reopened.load_msg(last_seq + 1).payload == b"written after recovery"
        assert reopened.state().last_seq == last_seq + 1
    finally:
        reopened.close()


def run_shared_writer_until_killed(path: Path, mode: str, acks_before_kill: int, kill_delay_s: float) -> dict[str, int]:
    """The writer with two stores of one engine, killed after `acks_before_kill` acks of either; the last
    group acknowledged per store."""
    command = [sys.executable, "-m", "tests.storage.crash_writer", str(path), mode]
    command += ["--seconds", str(WRITER_SECONDS), "--stores", "2"]
    writer = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    acked: dict[str, int] = {}
    try:
        for _ in range(2):
            opened = writer.stdout.readline().split()
            assert opened[:1] == ["open"], f"writer did not start: {opened}"
            acked[opened[1]] = int(opened[2])
        for _ in range(acks_before_kill):
            line = writer.stdout.readline().split()
            assert line[:1] == ["ack"], f"writer stopped before the kill: {line}"
            acked[line[1]] = int(line[2])
        time.sleep(kill_delay_s)
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=10)
        for rest in writer.stdout.read().splitlines():
            fields = rest.split()
            assert fields[0] == "ack", f"unexpected writer output {rest!r}"
            acked[fields[1]] = int(fields[2])
    finally:
        if writer.poll() is None:
            os.kill(writer.pid, signal.SIGKILL)
            writer.wait(timeout=10)
        writer.stdout.close()
    assert writer.returncode == -signal.SIGKILL
    return acked


@pytest.mark.parametrize("mode", ["sync", "nosync"])
def test_killed_writers_of_two_stores_in_one_engine_keep_every_acknowledged_group(
    mode: str, tmp_path: Path, fast_dir: Path
) -> None:
    """Two stores written and synced from two threads through one database and one WAL: after a kill
    each holds whole groups, agrees with its replay, and has every group acknowledged for it."""
    path = (tmp_path if mode == "sync" else fast_dir) / "streams.rocks"
    choices = random.Random(f"shared-crash-{mode}")
    for _ in range(2):
        acked = run_shared_writer_until_killed(path, mode, choices.randint(6, 40), choices.uniform(0, MAX_KILL_DELAY_S))
        engine = StreamStoreEngine(path)
        try:
            for name in (shared_store_name(0), shared_store_name(1)):
                store = RocksStreamStore(engine, name)
                recovered = assert_matches_replay(store, mode)
                store.close()
                assert recovered >= acked[name], f"{name}: acknowledged group {acked[name]} lost, holds {recovered}"
        finally:
            engine.close()
