"""A damaged stream-store database is refused at open, found by `verify`, and a damaged record read is an
error (CorruptStoreError), never a message.

RocksDB's default recovery opened a write-ahead log cut short as a shorter store, and its iterators stop
at a damaged block as if the data ended there; both are refused now.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.run.corruption import flip_bits, truncate_logs
from storage.config import StoreConfig
from storage.errors import CorruptStoreError
from storage.rocks import RocksStreamStore
from storage.rocks_engine import StreamStoreEngine

REPO_ROOT = Path(__file__).resolve().parents[2]
MESSAGES = 600
_WRITER = """
import os, signal, sys
from storage.config import StoreConfig
from storage.rocks import RocksStreamStore
from storage.rocks_engine import StreamStoreEngine
engine = StreamStoreEngine(sys.argv[1])
store = RocksStreamStore(engine, "s", StoreConfig())
for seq in range(1, 601):
    with store.write_group(sync=True):
        store.store_msg("s.%d" % (seq % 7), None, seq.to_bytes(4, "big") * 50, 1_700_000_000_000_000_000 + seq)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _write_and_crash(path: Path) -> None:
    subprocess.run([sys.executable, "-c", _WRITER, str(path)], cwd=REPO_ROOT, check=False, timeout=60)


def _payload(seq: int) -> bytes:
    return seq.to_bytes(4, "big") * 50


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_write_ahead_log_cut_short_is_never_opened_silently(tmp_path: Path, seed: int) -> None:
    """Opened without the incomplete record and said so (`tail_was_torn`): the store is a whole number of
    write groups, its applied metadata with them, and its Raft log replays the rest."""
    path = tmp_path / "streams.rocks"
    _write_and_crash(path)
    assert truncate_logs(path, random.Random(seed))
    try:
        engine = StreamStoreEngine(path)
    except CorruptStoreError:
        return
    try:
        assert engine.tail_was_torn
        store = RocksStreamStore(engine, "s", StoreConfig())
        assert store.state().messages < MESSAGES
        for seq in range(1, store.state().last_seq + 1):
            assert store.load_msg(seq).payload == _payload(seq)
        store.close()
    finally:
        engine.close()


def test_an_intact_store_after_a_crash_opens_whole(tmp_path: Path) -> None:
    path = tmp_path / "streams.rocks"
    _write_and_crash(path)
    engine = StreamStoreEngine(path)
    try:
        engine.verify()
        store = RocksStreamStore(engine, "s", StoreConfig())
        assert store.state().messages == MESSAGES
        store.close()
    finally:
        engine.close()


def _flushed_store(path: Path) -> None:
    engine = StreamStoreEngine(path)
    store = RocksStreamStore(engine, "s", StoreConfig())
    for seq in range(1, MESSAGES + 1):
        store.store_msg(f"s.{seq % 7}", None, _payload(seq), 1_700_000_000_000_000_000 + seq)
    store.close()
    engine.close()  # flushes: the messages are in tables only


def _flip_table_bits(path: Path, seed: int, flips: int) -> None:
    for log in path.glob("*.log"):
        log.unlink()  # empty after the flush; the damage is meant for the tables
    flip_bits(path, random.Random(seed), flips=flips)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_flipped_bits_in_tables_are_found_by_verify(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "streams.rocks"
    _flushed_store(path)
    _flip_table_bits(path, seed, flips=4)
    with pytest.raises(CorruptStoreError):
        engine = StreamStoreEngine(path)
        try:
            engine.verify()
        finally:
            engine.close()


def test_a_damaged_record_is_never_read_as_a_message(tmp_path: Path) -> None:
    """One flipped bit per seed: found at open, or reads of the damaged block refused; every message
    served is the one written."""
    outcomes = {"at open": 0, "on read": 0}
    for seed in range(1, 13):
        path = tmp_path / f"streams-{seed}.rocks"
        _flushed_store(path)
        _flip_table_bits(path, seed, flips=1)
        try:
            engine = StreamStoreEngine(path)
            store = RocksStreamStore(engine, "s", StoreConfig())
        except CorruptStoreError:
            outcomes["at open"] += 1
            continue
        try:
            for seq in range(1, MESSAGES + 1):
                try:
                    msg = store.load_msg(seq)
                except CorruptStoreError:
                    outcomes["on read"] += 1
                    # remembered: the node reports it on /healthz and its next start reads every store
                    assert engine.damage_seen is not None
                    continue
                assert (msg.seq, msg.payload) == (seq, _payload(seq))
        finally:
            store.close()
            engine.close()
    assert outcomes["on read"] > 0, outcomes
