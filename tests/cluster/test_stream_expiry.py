"""Expiry through the stream's log: Expire entries, per-message TTL, subject delete markers (ADR-43).

The sequences, headers and counts expected here are what a 3-node nats-server 2.15.1 cluster
showed for the same publishes (see tests/node/test_expiry.py, which runs both side by side).
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from cluster.stream.config import StreamConfig
from cluster.stream.config_check import normalize_stream_config
from cluster.stream.entries import DeleteMsg, Expire, Purge, UpdateConfig
from cluster.stream.machine import Expired, Stored, StreamStateMachine
from cluster.stream.publish import Accepted, prepare_publish
from gateway.headers import encode_headers
from raft.types import Entry, EntryType
from storage.interface import StreamStore
from storage.memory import MemoryStreamStore
from storage.rocks import RocksStreamStore
from tests.storage.oracle import FileCountingMemoryStore

SECOND = 1_000_000_000
T0 = 1_800_000_000 * SECOND
MARKER_1S = b"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 1s\r\nNats-Rollup: sub\r\n\r\n"


def config(**fields: object) -> StreamConfig:
    return normalize_stream_config(StreamConfig(name="E", subjects=("e.>",), **fields))  # type: ignore[arg-type]


class Log:
    def __init__(self) -> None:
        self.index = 0

    def __call__(self, data: bytes) -> Entry:
        self.index += 1
        return Entry(term=1, index=self.index, type=EntryType.NORMAL, data=data)


def publish(cfg: StreamConfig, subject: str, ts: int, payload: bytes = b"x", **headers: str) -> bytes:
    header = encode_headers([(k.replace("_", "-"), v) for k, v in headers.items()]) if headers else b""
    decision = prepare_publish(cfg, subject, header, payload, ts)
    assert isinstance(decision, Accepted), decision
    return decision.entry.encode()


def live(m: StreamStateMachine) -> list[tuple[int, str, bytes | None]]:
    return [(msg.seq, msg.subject, msg.headers) for msg in m.store.load_batch(">", 0, 1000).messages]


def test_expire_removes_what_is_due_and_keeps_never() -> None:
    cfg = config(max_age=10 * SECOND, allow_msg_ttl=True, duplicate_window=SECOND)
    m, log = StreamStateMachine(MemoryStreamStore(), cfg, sync_writes=False), Log()
    m.apply(
        [
            log(publish(cfg, "e.a", T0)),
            log(publish(cfg, "e.n", T0 + 1, Nats_TTL="never")),
            log(publish(cfg, "e.t", T0 + 2, Nats_TTL="2")),
        ]
    )
    assert m.apply([log(Expire(T0 + 2 * SECOND + 2).encode())]) == [Expired((3,))]
    assert m.apply([log(Expire(T0 + 60 * SECOND).encode())]) == [Expired((1,))]
    assert [seq for seq, _, _ in live(m)] == [2]
    # an Expire proposed with a clock behind the stream's last message uses the last message's time
    m.apply([log(publish(cfg, "e.b", T0 + 100 * SECOND))])
    assert m.apply([log(Expire(T0).encode())]) == [Expired(())]


def test_delete_markers_as_nats_server_places_them() -> None:
    # nats-server: max_age 2s, marker TTL 1s; a1 a2 on m1.a, b1 on m1.b, c1 on m1.c with Nats-TTL 1
    # (subjects of the same length here, so the byte counts compare)
    cfg = config(max_age=2 * SECOND, subject_delete_marker_ttl=SECOND)
    assert cfg.allow_msg_ttl and cfg.allow_rollup_hdrs
    m, log = StreamStateMachine(FileCountingMemoryStore(), cfg, sync_writes=False), Log()
    m.apply(
        [
            log(publish(cfg, "e.aa", T0, b"a1")),
            log(publish(cfg, "e.aa", T0 + 1, b"a2")),
            log(publish(cfg, "e.bb", T0 + 2, b"b1")),
            log(publish(cfg, "e.cc", T0 + 3, b"c1", Nats_TTL="1")),
        ]
    )
    # c1's TTL runs out: it was the last on its subject, so a marker takes its place
    first = T0 + SECOND + 3
    assert m.apply([log(Expire(first).encode())]) == [Expired((4,), markers=((5, 4),))]
    marker = m.store.load_msg(5)
    assert (marker.subject, marker.headers, marker.payload, marker.ts_ns) == ("e.cc", MARKER_1S, b"", first)
    state = m.store.state()
    assert (state.messages, state.last_seq, state.bytes) == (4, 5, 218)  # as nats-server reported
    # max_age takes a1 (not the last of its subject: no marker), then a2 and b1 (markers), and the first
    # marker's own TTL runs out (a marker leaves no marker)
    second = T0 + 2 * SECOND + 10
    assert m.apply([log(Expire(second).encode())]) == [Expired((1, 2, 3, 5), markers=((6, 2), (7, 3)))]
    assert live(m) == [(6, "e.aa", MARKER_1S), (7, "e.bb", MARKER_1S)]
    assert m.store.state().bytes == 220
    assert m.apply([log(Expire(second + SECOND).encode())]) == [Expired((6, 7))]
    state = m.store.state()
    assert (state.messages, state.first_seq, state.last_seq) == (0, 8, 7)
    assert m.last_seq == 7


def test_a_kv_purge_that_expires_leaves_no_marker() -> None:
    cfg = config(allow_msg_ttl=True, subject_delete_marker_ttl=SECOND, max_msgs_per_subject=1)
    m, log = StreamStateMachine(MemoryStreamStore(), cfg, sync_writes=False), Log()
    m.apply([log(publish(cfg, "e.k", T0, b"", KV_Operation="PURGE", Nats_Rollup="sub", Nats_TTL="1"))])
    assert m.apply([log(Expire(T0 + SECOND).encode())]) == [Expired((1,))]
    assert m.store.state().messages == 0


def test_ttls_below_the_marker_ttl_are_raised_to_it() -> None:
    # nats-server stored `A: 1, B: 2, Nats-TTL: 1` on a stream with a 2s marker TTL like this
    cfg = config(subject_delete_marker_ttl=2 * SECOND)
    m, log = StreamStateMachine(MemoryStreamStore(), cfg, sync_writes=False), Log()
    m.apply(
        [
            log(publish(cfg, "e.a", T0, A="1", Nats_TTL="1", B="2")),
            log(publish(cfg, "e.b", T0 + 1, Nats_TTL="5")),
            log(publish(cfg, "e.c", T0 + 2, Nats_TTL="never")),
        ]
    )
    assert m.store.load_msg(1).headers == b"NATS/1.0\r\nA: 1\r\nB: 2\r\nNats-TTL: 2\r\n\r\n"
    assert m.store.load_msg(2).headers == b"NATS/1.0\r\nNats-TTL: 5\r\n\r\n"
    assert m.store.load_msg(3).headers == b"NATS/1.0\r\nNats-TTL: never\r\n\r\n"
    assert m.store.next_expiry_ns() == T0 + 2 * SECOND
    # a stream holding one message per subject keeps the TTL asked for
    single = dataclasses.replace(cfg, max_msgs_per_subject=1)
    m.apply([log(UpdateConfig(single).encode()), log(publish(single, "e.d", T0 + 3, Nats_TTL="1"))])
    assert m.store.load_msg(4).headers == b"NATS/1.0\r\nNats-TTL: 1\r\n\r\n"


def test_an_expire_entry_stops_at_its_limit() -> None:
    cfg = config(max_age=SECOND, duplicate_window=SECOND)
    m, log = StreamStateMachine(MemoryStreamStore(), cfg, sync_writes=False), Log()
    m.apply([log(publish(cfg, f"e.{i}", T0 + i)) for i in range(5)])
    assert m.apply([log(Expire(T0 + 10 * SECOND, limit=2).encode())]) == [Expired((1, 2), more=True)]
    assert m.apply([log(Expire(T0 + 10 * SECOND, limit=3).encode())]) == [Expired((3, 4, 5), more=True)]
    assert m.apply([log(Expire(T0 + 10 * SECOND, limit=3).encode())]) == [Expired(())]


def _random_log(rng: random.Random, cfg: StreamConfig, count: int) -> list[Entry]:
    log = Log()
    entries = []
    ts = T0
    for _ in range(count):
        ts += rng.randrange(0, SECOND // 2)
        roll = rng.random()
        if roll < 0.7:
            headers: dict[str, str] = {}
            if rng.random() < 0.5:
                headers["Nats_TTL"] = rng.choice(["1", "2", "never", "3s"])
            if rng.random() < 0.05:
                headers["KV_Operation"] = "PURGE"
            data = publish(cfg, f"e.{rng.choice('abcdef')}", ts, rng.randbytes(rng.randrange(8)), **headers)
        elif roll < 0.75:
            data = DeleteMsg(rng.randrange(1, 60)).encode()
        elif roll < 0.77:
            data = Purge(filter=rng.choice(["", "e.a"])).encode()
        else:
            data = Expire(ts + rng.randrange(0, 3 * SECOND), limit=rng.choice([0, 0, 2])).encode()
        entries.append(log(data))
    return entries


@pytest.mark.parametrize("seed", range(4))
def test_replicas_on_either_store_agree_on_expiry_and_markers(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    cfg = config(max_age=4 * SECOND, subject_delete_marker_ttl=SECOND, duplicate_window=SECOND)
    entries = _random_log(rng, cfg, 200)
    memory = StreamStateMachine(FileCountingMemoryStore(), cfg, sync_writes=False)
    results = memory.apply(entries)
    assert any(isinstance(r, Expired) and r.markers for r in results)
    # a file replica that restarts and takes a snapshot from the memory one midway
    cut1, cut2 = sorted(rng.sample(range(1, len(entries)), 2))
    rocks: StreamStore = RocksStreamStore.open_alone(tmp_path / "a", None)
    replica = StreamStateMachine(rocks, cfg, sync_writes=False)
    other = replica.apply(entries[:cut1])
    rocks.close()
    reopened = RocksStreamStore.open_alone(tmp_path / "a")
    replica = StreamStateMachine(reopened, cfg, sync_writes=False)
    other += replica.apply(entries[cut1:cut2])
    replica_b = StreamStateMachine(RocksStreamStore.open_alone(tmp_path / "b"), cfg, sync_writes=False)
    snapshot_source = StreamStateMachine(FileCountingMemoryStore(), cfg, sync_writes=False)
    snapshot_source.apply(entries[:cut2])
    replica_b.restore(snapshot_source.snapshot())
    other_b = replica_b.apply(entries[cut2:])
    other += replica.apply(entries[cut2:])
    assert results == other
    assert results[cut2:] == other_b
    for m in (replica, replica_b):
        assert live(m) == live(memory)
        assert m.store.state() == memory.store.state()
        assert m.store.next_expiry_ns() == memory.store.next_expiry_ns()
    reopened.close()
    replica_b.store.close()


def test_stored_result_of_a_write_that_expires_others() -> None:
    cfg = config(allow_msg_ttl=True)
    m, log = StreamStateMachine(MemoryStreamStore(), cfg, sync_writes=False), Log()
    m.apply([log(publish(cfg, "e.a", T0, Nats_TTL="1"))])
    # without markers, a write removes what is due at its own time, as it always did for max_age
    assert m.apply([log(publish(cfg, "e.b", T0 + SECOND))]) == [Stored(2, T0 + SECOND, (1,))]


def test_a_store_from_before_ttls_learns_them_from_the_stream_config(tmp_path: Path) -> None:
    # a KV bucket's stream (allow_msg_ttl) whose store was written when StoreConfig had no such field
    cfg = config(allow_msg_ttl=True)
    m = StreamStateMachine(RocksStreamStore.open_alone(tmp_path / "s"), cfg, sync_writes=False)
    log = Log()
    m.apply([log(publish(cfg, "e.a", T0, Nats_TTL="1"))])
    m.store.update_config(dataclasses.replace(m.store.config, allow_msg_ttl=False))
    assert m.store.next_expiry_ns() is None
    m.store.close()
    reopened = StreamStateMachine(RocksStreamStore.open_alone(tmp_path / "s"), cfg, sync_writes=False)
    assert reopened.store.config.allow_msg_ttl
    assert reopened.store.next_expiry_ns() == T0 + SECOND
    reopened.store.close()
