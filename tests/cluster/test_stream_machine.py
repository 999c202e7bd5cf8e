"""The stream state machine over MemoryStreamStore: results, determinism, snapshots, restarts."""

import dataclasses
import pathlib
import random

import orjson
import pytest

from cluster.api.errors import JSErrors
from cluster.stream.config import Discard, RePublish, StorageType, StreamConfig, StreamSource
from cluster.stream.config_check import normalize_stream_config
from cluster.stream.entries import (
    DeleteMsg,
    Expire,
    Purge,
    Republished,
    SkipMsgs,
    StoreAtSeq,
    StoreAtSeqs,
    StoreMsg,
    UpdateConfig,
)
from cluster.stream.info import (
    msg_delete_response,
    parse_msg_delete_request,
    parse_purge_request,
    stream_purge_response,
)
from cluster.stream.machine import (
    ConfigApplied,
    Deleted,
    Expired,
    NoOp,
    Purged,
    PurgeDone,
    Skipped,
    Stored,
    StreamStateMachine,
)
from cluster.stream.publish import Accepted, Duplicate, Rejected, prepare_publish
from cluster.stream.replica import removed_by
from cluster.stream.republish import StoredForRepublish
from gateway.headers import encode_headers
from raft.types import Entry, EntryType
from storage.memory import MemoryStreamStore
from storage.rocks import RocksStreamStore
from tests.cluster.trace_data import client_json, server_json, server_obj
from tests.storage.oracle import FileCountingMemoryStore

SECOND = 1_000_000_000
T0 = 1_800_000_000 * SECOND
CFG = normalize_stream_config(
    StreamConfig(name="S", subjects=("s.>",), duplicate_window=60 * SECOND, allow_rollup_hdrs=True)
)


def machine(cfg: StreamConfig = CFG) -> StreamStateMachine:
    return StreamStateMachine(MemoryStreamStore(), cfg, sync_writes=False)


class Log:
    """Builds committed entries with increasing indexes."""

    def __init__(self) -> None:
        self.index = 0

    def __call__(self, data: bytes, kind: EntryType = EntryType.NORMAL) -> Entry:
        self.index += 1
        return Entry(term=1, index=self.index, type=kind, data=data)


def publish(subject: str, payload: bytes, ts: int, cfg: StreamConfig = CFG, **headers: str) -> bytes:
    header = encode_headers([(k.replace("_", "-"), v) for k, v in headers.items()]) if headers else b""
    decision = prepare_publish(cfg, subject, header, payload, ts)
    assert isinstance(decision, Accepted), decision
    return decision.entry.encode()


def state_of(m: StreamStateMachine) -> tuple[bytes, list[tuple[str, int, int]], int, str]:
    return m.snapshot(), m.dedup_window.items(), m.applied_index, m.last_msg_id


def test_results_of_each_op() -> None:
    m, log = machine(), Log()
    results = m.apply(
        [
            log(b""),  # a new leader's empty entry
            log(publish("s.a", b"1", T0, Nats_Msg_Id="x")),
            log(publish("s.a", b"2", T0 + 1, Nats_Msg_Id="x")),
            log(publish("s.b", b"3", T0 + 2, Nats_Expected_Last_Sequence="1")),
            log(publish("s.b", b"4", T0 + 3, Nats_Expected_Last_Sequence="1")),
            log(publish("s.c", b"5", T0 + 4, Nats_Expected_Last_Subject_Sequence="0")),
            log(DeleteMsg(seq=3).encode()),
            log(DeleteMsg(seq=3).encode()),
            log(Purge(filter="s.a").encode()),
            log(SkipMsgs(count=2).encode()),
            log(b"conf", EntryType.CONF_CHANGE),
        ]
    )
    assert results == [
        NoOp(),
        Stored(1, T0),
        Duplicate(1),
        Stored(2, T0 + 2),
        Rejected(JSErrors.STREAM_WRONG_LAST_SEQUENCE(seq=2)),
        Stored(3, T0 + 4),
        Deleted(3),
        Rejected(JSErrors.SEQUENCE_NOT_FOUND(seq=3)),
        Purged(1),
        Skipped(5),
        NoOp(),
    ]
    assert m.applied_index == 11
    assert m.last_seq == 5
    # the purged message's id no longer dedups: its message is gone
    assert m.duplicate_of("x", T0 + 10) is None


def test_messages_at_sequences_are_stored_in_one_entry_until_one_is_not() -> None:
    """A restore's STORE_AT_SEQS: each message at its own sequence and time, gaps read as deleted; the
    first one that cannot be stored (a sequence already passed) ends the entry with its result."""
    m, log = machine(), Log()
    at = [StoreAtSeq(seq, "s.a", b"", b"%d" % seq, T0 + seq) for seq in (5, 6, 9)]
    assert m.apply([log(StoreAtSeqs(tuple(at)).encode())]) == [Stored(9, T0 + 9)]
    state = m.store.state()
    assert (state.first_seq, state.last_seq, state.messages, state.num_deleted) == (5, 9, 3, 2)
    assert m.store.load_msg(6).ts_ns == T0 + 6
    again = StoreAtSeqs((StoreAtSeq(10, "s.a", b"", b"x", T0 + 10), at[0]))
    assert m.apply([log(again.encode())]) == [Duplicate(5)]
    assert m.last_seq == 10  # the message before it was stored


def test_racing_publishes_are_settled_by_log_order() -> None:
    # two leaders' views both saw last seq 0 and the same msg id free: the log decides
    m, log = machine(), Log()
    a = publish("s.a", b"a", T0, Nats_Expected_Last_Sequence="0", Nats_Msg_Id="same")
    b = publish("s.a", b"b", T0 + 1, Nats_Expected_Last_Sequence="0")
    c = publish("s.a", b"c", T0 + 2, Nats_Msg_Id="same")
    assert m.apply([log(a), log(b), log(c)]) == [
        Stored(1, T0),
        Rejected(JSErrors.STREAM_WRONG_LAST_SEQUENCE(seq=1)),
        Duplicate(1),
    ]


def test_expected_last_msg_id_and_subject_sequence_after_purge() -> None:
    m, log = machine(), Log()
    m.apply([log(publish("s.k", b"v1", T0, Nats_Msg_Id="m1")), log(publish("s.k", b"v2", T0 + 1))])
    assert m.last_msg_id == ""
    [wrong] = m.apply([log(publish("s.k", b"v3", T0 + 2, Nats_Expected_Last_Msg_Id="m1"))])
    assert wrong == Rejected(JSErrors.STREAM_WRONG_LAST_MSG_ID(id=""))
    m.apply([log(Purge(filter="s.k").encode())])
    # purge-aware: no message left on the subject, so 0 matches
    [ok] = m.apply([log(publish("s.k", b"v4", T0 + 3, Nats_Expected_Last_Subject_Sequence="0"))])
    assert ok == Stored(3, T0 + 3)


def test_timestamps_never_go_backwards() -> None:
    m, log = machine(), Log()
    assert m.apply([log(publish("s.a", b"1", T0 + 100)), log(publish("s.a", b"2", T0))]) == [
        Stored(1, T0 + 100),
        Stored(2, T0 + 100),
    ]


def test_rollup_and_limits_report_removed_sequences() -> None:
    m, log = machine(), Log()
    m.apply([log(publish("s.a", b"1", T0)), log(publish("s.b", b"2", T0)), log(publish("s.a", b"3", T0))])
    [rolled] = m.apply([log(publish("s.a", b"4", T0, Nats_Rollup="sub"))])
    assert rolled == Stored(4, T0, (1, 3))
    [all_] = m.apply([log(publish("s.c", b"5", T0, Nats_Rollup="all"))])
    assert all_ == Stored(5, T0, (2, 4))
    assert m.store.state().messages == 1


def test_discard_new_limit_is_a_store_error() -> None:
    cfg = normalize_stream_config(StreamConfig(name="S", subjects=("s.>",), max_msgs=1, discard=Discard.NEW))
    m, log = machine(cfg), Log()
    assert m.apply([log(publish("s.a", b"1", T0, cfg)), log(publish("s.a", b"2", T0, cfg))]) == [
        Stored(1, T0),
        Rejected(JSErrors.STREAM_STORE_FAILED(err="maximum messages exceeded")),
    ]


def test_permissions_are_checked_at_apply() -> None:
    cfg = normalize_stream_config(
        StreamConfig(name="S", subjects=("s.>",), deny_delete=True, deny_purge=True)
    )
    m, log = machine(cfg), Log()
    m.apply([log(publish("s.a", b"1", T0, cfg))])
    assert m.apply([log(DeleteMsg(1).encode()), log(Purge().encode())]) == [
        Rejected(JSErrors.STREAM_MSG_DELETE_FAILED(err="message delete not permitted")),
        Rejected(JSErrors.STREAM_PURGE_FAILED(err="stream purge not permitted")),
    ]
    # a publish decided under an old config is re-checked against the config in force at apply
    entry = publish("s.a", b"x" * 100, T0)
    smaller = dataclasses.replace(cfg, max_msg_size=10)
    assert m.apply([log(UpdateConfig(smaller).encode()), log(entry)]) == [
        ConfigApplied(smaller),
        Rejected(JSErrors.STREAM_MESSAGE_EXCEEDS_MAXIMUM()),
    ]
    assert m.config == smaller


def test_config_update_enforces_limits_and_expire_op() -> None:
    m, log = machine(), Log()
    m.apply([log(publish("s.a", str(i).encode(), T0 + i * SECOND)) for i in range(5)])
    [applied] = m.apply([log(UpdateConfig(dataclasses.replace(CFG, max_msgs=3)).encode())])
    assert isinstance(applied, ConfigApplied) and applied.removed == (1, 2)
    aged = dataclasses.replace(CFG, max_msgs=3, max_age=10 * SECOND, duplicate_window=10 * SECOND)
    m.apply([log(UpdateConfig(aged).encode())])
    assert m.apply([log(Expire(T0 + 12 * SECOND + SECOND // 2).encode())]) == [Expired((3,))]
    assert m.store.state().first_seq == 4


def test_mirror_copies_at_origin_sequences() -> None:
    cfg = normalize_stream_config(StreamConfig(name="M", mirror=StreamSource(name="O")))
    m, log = machine(cfg), Log()
    results = m.apply(
        [
            log(StoreAtSeq(3, "o.a", b"", b"x", T0).encode()),
            log(StoreAtSeq(3, "o.a", b"", b"x", T0).encode()),
            log(StoreAtSeq(5, "o.b", b"NATS/1.0\r\nNats-Msg-Id: q\r\n\r\n", b"y", T0 + 1).encode()),
        ]
    )
    assert results == [Stored(3, T0), Duplicate(3), Stored(5, T0 + 1)]
    assert m.store.state().num_deleted == 1
    assert len(m.dedup_window) == 0  # mirrors never dedup


def test_replayed_entries_are_skipped_and_restart_resumes() -> None:
    store = MemoryStreamStore()
    m, log = StreamStateMachine(store, CFG, sync_writes=False), Log()
    entries = [
        log(publish("s.a", b"1", T0, Nats_Msg_Id="a")),
        log(publish("s.b", b"2", T0 + 1, Nats_Msg_Id="b")),
    ]
    m.apply(entries)
    # the same store opened again (a restart): applied index, config and the dedup window come back
    again = StreamStateMachine(
        store, dataclasses.replace(CFG, description="stale assignment"), sync_writes=False
    )
    assert again.applied_index == 2 and again.config == CFG
    assert again.dedup_window == m.dedup_window
    assert again.apply(entries) == [NoOp(), NoOp()]
    assert again.apply([log(publish("s.a", b"3", T0 + 2, Nats_Msg_Id="a"))]) == [Duplicate(1)]


def _random_log(rng: random.Random, count: int) -> list[Entry]:
    log = Log()
    entries = []
    ts = T0
    for _ in range(count):
        ts += rng.randrange(0, 3 * SECOND)
        roll = rng.random()
        if roll < 0.75:
            headers: dict[str, str] = {}
            if rng.random() < 0.4:
                headers["Nats_Msg_Id"] = f"id{rng.randrange(30)}"
            if rng.random() < 0.1:
                headers["Nats_Expected_Last_Sequence"] = str(rng.randrange(40))
            if rng.random() < 0.1:
                headers["Nats_Expected_Last_Subject_Sequence"] = str(rng.randrange(5))
            if rng.random() < 0.05:
                headers["Nats_Rollup"] = "sub"
            data = publish(f"s.{rng.choice('abcd')}", rng.randbytes(rng.randrange(20)), ts, **headers)
        elif roll < 0.85:
            data = DeleteMsg(rng.randrange(1, 40), erase=rng.random() < 0.5).encode()
        elif roll < 0.9:
            data = Purge(filter=rng.choice(["", "s.a", "s.*"]), keep=rng.randrange(3)).encode()
        elif roll < 0.95:
            window = rng.choice([20, 40, 60]) * SECOND
            data = UpdateConfig(
                dataclasses.replace(CFG, duplicate_window=window, max_msgs=rng.choice([-1, 15]))
            ).encode()
        else:
            data = Expire(ts).encode()
        entries.append(log(data))
    return entries


@pytest.mark.parametrize("seed", range(6))
def test_replicas_fed_the_same_log_agree_and_snapshots_restore(seed: int) -> None:
    rng = random.Random(seed)
    entries = _random_log(rng, 150)
    a, b = machine(), machine()
    results_a = a.apply(entries)
    # b applies the same log in differently sized batches, with a restart and a snapshot restore midway
    cut1, cut2 = sorted(rng.sample(range(1, len(entries)), 2))
    results_b = b.apply(entries[:cut1])
    restarted = StreamStateMachine(b.store, CFG, sync_writes=False)
    results_b += restarted.apply(entries[cut1:cut2])
    fresh = machine(dataclasses.replace(CFG, description="placeholder"))
    fresh.restore(restarted.snapshot())
    assert state_of(fresh) == state_of(restarted)
    results_b += fresh.apply(entries[cut2:])
    assert results_a == results_b
    assert state_of(a) == state_of(fresh)
    assert any(isinstance(r, Duplicate) for r in results_a)
    assert any(isinstance(r, Rejected) for r in results_a)


def test_restore_rejects_foreign_snapshot() -> None:
    bare = MemoryStreamStore()
    bare.store_msg("x", None, b"1", T0)
    with pytest.raises(ValueError):
        machine().restore(bare.snapshot())


def test_trace_09_purges_and_deletes_through_the_log() -> None:
    trace = "09-purge-delete.txt"
    cfg = normalize_stream_config(StreamConfig(name="PURGE", subjects=("purge.>",)))
    m, log = machine(cfg), Log()
    subjects = ["purge.a", "purge.b"] * 4 + ["purge.c"] + ["purge.d"] * 4
    m.apply([log(publish(s, b"x", T0 + i, cfg)) for i, s in enumerate(subjects)])

    def state_matches(marker: str) -> None:
        expected = server_obj(trace, marker)["state"]
        state = m.store.state()
        got = {
            "messages": state.messages,
            "first_seq": state.first_seq,
            "last_seq": state.last_seq,
            "num_subjects": state.num_subjects,
            "num_deleted": state.num_deleted,
        }
        assert got == {k: expected.get(k, 0) for k in got}

    for marker in ("subject='purge.a')", "keep=1"):
        [purged] = m.apply([log(parse_purge_request(client_json(trace, marker), cfg).encode())])
        assert isinstance(purged, Purged)
        assert stream_purge_response(purged.count) == server_json(trace, marker)
    state_matches("jsm.stream_info('PURGE')")
    [deleted] = m.apply(
        [log(parse_msg_delete_request(client_json(trace, "delete_msg('PURGE', 9)   (MSG"), cfg).encode())]
    )
    assert deleted == Deleted(9) and msg_delete_response() == server_json(
        trace, "delete_msg('PURGE', 9)   (MSG"
    )
    [again] = m.apply(
        [log(parse_msg_delete_request(client_json(trace, "(again: already gone)"), cfg).encode())]
    )
    assert again == Rejected(JSErrors.SEQUENCE_NOT_FOUND(seq=9))
    [kept] = m.apply([log(parse_msg_delete_request(b'{"seq":10,"no_erase":true}', cfg).encode())])
    assert kept == Deleted(10)
    state_matches("(interior deletes show in num_deleted)")
    for marker in ("seq=12", "jsm.purge_stream('PURGE')   (all)"):
        [purged] = m.apply([log(parse_purge_request(client_json(trace, marker), cfg).encode())])
        assert isinstance(purged, Purged)
        assert stream_purge_response(purged.count) == server_json(trace, marker)
    state_matches("(after purge all: first_seq = last_seq + 1)")


def logical_state(m: StreamStateMachine) -> tuple[object, ...]:
    """What a replica holds, independent of the store's on-disk form."""
    state = m.store.state(include_deleted=True)
    messages = []
    if state.messages:
        messages = list(m.store.load_batch(">", 1, state.messages).messages)
    return state, messages, m.dedup_window.items(), m.applied_index, m.last_msg_id, m.config


@pytest.mark.parametrize("seed", range(3))
def test_rocks_and_memory_replicas_agree_across_a_reopen(seed: int, tmp_path: pathlib.Path) -> None:
    entries = _random_log(random.Random(100 + seed), 120)
    memory = StreamStateMachine(FileCountingMemoryStore(), CFG, sync_writes=False)
    rocks = StreamStateMachine(RocksStreamStore.open_alone(tmp_path / "s"), CFG, sync_writes=False)
    cut = len(entries) // 2
    assert memory.apply(entries[:cut]) == rocks.apply(entries[:cut])
    rocks.store.close()
    # a process restart: the directory reopened, the machine rebuilt from what the store kept
    reopened = StreamStateMachine(RocksStreamStore.open_alone(tmp_path / "s"), CFG, sync_writes=True)
    assert reopened.applied_index == entries[cut - 1].index
    # the whole log again: entries the store already has are NoOps
    assert [NoOp()] * cut + memory.apply(entries[cut:]) == reopened.apply(entries)
    assert logical_state(memory) == logical_state(reopened)
    # a rocks snapshot restores into a memory replica and vice versa
    copy = StreamStateMachine(FileCountingMemoryStore(), CFG, sync_writes=False)
    copy.restore(reopened.snapshot_chunks())
    assert logical_state(copy) == logical_state(memory)
    reopened.store.close()


def test_a_leader_gets_what_republish_needs_with_the_previous_sequence_read_before_limits_remove_it() -> None:
    cfg = normalize_stream_config(
        StreamConfig(name="S", subjects=("s.>",), max_msgs_per_subject=1, republish=RePublish(dest="rp.>"))
    )
    follower, leader, log = machine(cfg), machine(cfg), Log()
    leader.report_republish = True
    entries = [log(publish("s.a", b"1", T0, cfg)), log(publish("s.a", b"2", T0 + 1, cfg))]
    assert [r.republish for r in follower.apply(entries) if isinstance(r, Stored)] == [None, None]
    first, second = leader.apply(entries)
    assert isinstance(first, Stored) and isinstance(second, Stored)
    assert second.removed == (1,)  # the limit took seq 1 as seq 2 was stored
    assert first.republish == StoredForRepublish("rp.s.a", "s.a", b"", b"1", 0)
    assert second.republish == StoredForRepublish("rp.s.a", "s.a", b"", b"2", 1)


def test_the_republish_position_is_replicated_and_starts_where_republish_is_turned_on() -> None:
    m, log = machine(), Log()
    m.apply([log(publish("s.a", b"1", T0)), log(publish("s.a", b"2", T0 + 1))])
    assert m.republished_through == 0  # nothing is owed without RePublish...
    with_republish = dataclasses.replace(CFG, republish=RePublish(dest="rp.>"))
    m.apply([log(UpdateConfig(with_republish).encode())])
    assert m.republished_through == 2  # ...nor for what was stored before it was turned on
    m.apply([log(publish("s.a", b"3", T0 + 2)), log(Republished(seq=3).encode())])
    assert m.republished_through == 3
    assert m.apply([log(Republished(seq=1).encode())]) == [NoOp()]
    assert m.republished_through == 3  # never backwards
    copy = machine()
    copy.restore(m.snapshot())
    assert copy.republished_through == 3


@pytest.mark.parametrize(
    ("entries", "first_seq", "last_seq"),
    # (state after those entries on a new R1 stream) as a real nats-server 2.15.1 reported them
    [
        ([], 0, 0),
        ([Purge()], 1, 0),
        ([Purge(filter=">")], 1, 0),
        ([Purge(seq=1)], 0, 0),
        ([Purge(seq=5)], 5, 4),
        ([Purge(keep=1)], 0, 0),
        ([Purge(filter="s.a")], 0, 0),
    ],
)
def test_an_unused_stream_reports_first_seq_0_as_nats_server(
    entries: list[Purge], first_seq: int, last_seq: int
) -> None:
    m, log = machine(), Log()
    m.apply([log(entry.encode()) for entry in entries])
    state = m.stream_state()
    assert (state.first_seq, state.last_seq, state.messages) == (first_seq, last_seq, 0)
    copy = machine()
    copy.restore(m.snapshot())
    assert copy.stream_state().first_seq == first_seq


def test_purging_an_unused_replicated_stream_leaves_it_unused() -> None:
    # a 3-node nats-server 2.15.1 cluster: first_seq stays 0 after purging a new R3 stream (1 on R1)
    m, log = machine(dataclasses.replace(CFG, num_replicas=3)), Log()
    m.apply([log(Purge().encode())])
    assert (m.stream_state().first_seq, m.stream_state().last_seq) == (0, 0)
    m.apply([log(Purge(seq=5).encode())])
    assert (m.stream_state().first_seq, m.stream_state().last_seq) == (5, 4)


def test_first_seq_starts_a_new_stream_there_and_messages_move_first_seq_off_0() -> None:
    starting = machine(dataclasses.replace(CFG, first_seq=100))
    assert (starting.stream_state().first_seq, starting.stream_state().last_seq) == (100, 99)
    [stored] = starting.apply([Log()(publish("s.a", b"1", T0))])
    assert isinstance(stored, Stored) and stored.seq == 100
    m, log = machine(), Log()
    m.apply([log(publish("s.a", b"1", T0)), log(DeleteMsg(seq=1).encode())])
    assert (m.stream_state().first_seq, m.stream_state().last_seq) == (2, 1)  # all deleted: last + 1
    skipped = machine()
    skipped.apply([Log()(SkipMsgs(count=3).encode())])
    assert skipped.stream_state().first_seq == 4


def test_purges_are_kept_for_the_consumers_with_where_the_stream_then_starts() -> None:
    m, log = machine(), Log()
    entries = [log(publish(f"s.{s}", b"x", T0 + i)) for i, s in enumerate("abab")]
    m.apply([*entries, log(Purge(filter="s.a", keep=1).encode()), log(Purge(seq=3).encode())])
    m.apply([log(Purge(filter="s.b").encode()), log(Purge(filter="s..a").encode())])
    # by subject: the first message left on it (0: none); a filter that is no filter purged nothing
    assert m.take_purges() == [
        PurgeDone("s.a", first_seq=2, last_seq=4, filter_first_seq=3),
        PurgeDone("", first_seq=3, last_seq=4, filter_first_seq=3),
        PurgeDone("s.b", first_seq=3, last_seq=4, filter_first_seq=0),
    ]
    assert m.take_purges() == []


def test_what_entries_removed_one_by_one_is_read_from_their_results() -> None:
    """What a stream replica tells its consumers (their leaders drop those still pending)."""
    cfg = normalize_stream_config(
        StreamConfig(name="S", subjects=("s.>",), max_msgs_per_subject=1, max_age=60 * SECOND)
    )
    m, log = machine(cfg), Log()
    results = m.apply([log(publish(f"s.{s}", b"x", T0 + i, cfg)) for i, s in enumerate("aab")])
    results += m.apply([log(DeleteMsg(seq=3).encode()), log(Purge(filter="s.b").encode())])
    results += m.apply([log(publish("s.c", b"x", T0 + 3, cfg)), log(Expire(T0 + 61 * SECOND).encode())])
    # the second s.a replaced the first (limits), 3 deleted, 2 and 4 expired; the purge is told apart
    assert removed_by(results) == [1, 3, 2, 4]


def test_a_purge_filter_that_is_no_valid_filter_purges_nothing() -> None:
    # as nats-server 2.15.1 answers it: success, 0 purged
    m, log = machine(), Log()
    results = m.apply([log(publish("s.a", b"1", T0)), log(Purge(filter="s..a").encode())])
    assert results[1] == Purged(0) and m.stream_state().messages == 1


@pytest.mark.parametrize(
    ("storage", "expected"),
    [
        # each answer is nats-server 2.15.1's to the same deletes (one node, a stream of six messages)
        (
            StorageType.FILE,
            [
                Deleted(1),
                Deleted(3),
                Rejected(JSErrors.STREAM_MSG_DELETE_FAILED(err="no message found")),  # below first_seq
                Rejected(JSErrors.SEQUENCE_NOT_FOUND(seq=3)),  # inside, deleted already
                Rejected(JSErrors.STREAM_MSG_DELETE_FAILED(err="stream store EOF")),  # past last_seq
                Rejected(JSErrors.STREAM_MSG_DELETE_FAILED(err="no message found")),  # sequence 0
            ],
        ),
        (
            StorageType.MEMORY,
            [Deleted(1), Deleted(3)] + [Rejected(JSErrors.SEQUENCE_NOT_FOUND(seq=s)) for s in (1, 3, 99, 0)],
        ),
    ],
)
def test_a_delete_that_finds_nothing_answers_as_the_storage_does(
    storage: StorageType, expected: list[object]
) -> None:
    cfg = dataclasses.replace(CFG, storage=storage)
    m = machine(cfg)
    log = Log()
    m.apply([log(publish(f"s.{i}", b"x", T0 + i, cfg)) for i in range(6)])
    results = m.apply(
        [
            log(DeleteMsg(seq=seq, erase=erase).encode())
            for seq, erase in [(1, True), (3, False), (1, True), (3, True), (99, True), (0, False)]
        ]
    )
    assert results == expected


def test_a_restart_reads_the_duplicate_window_only_when_first_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = normalize_stream_config(dataclasses.replace(CFG, max_msgs=40))
    store = MemoryStreamStore()
    kept, log = StreamStateMachine(store, cfg, sync_writes=False), Log()
    kept.apply([log(publish("s.a", b"m", T0 + n, cfg, Nats_Msg_Id=f"id{n}")) for n in range(30)])
    reads: list[int] = []
    real_headers_from = MemoryStreamStore.headers_from
    real_load_batch = MemoryStreamStore.load_batch

    def counted_headers_from(self: MemoryStreamStore, start_seq: int) -> list[tuple[int, int, bytes]]:
        reads.append(start_seq)
        return real_headers_from(self, start_seq)

    def counted_load_batch(self: MemoryStreamStore, *args: object, **kwargs: object) -> object:
        reads.append(-1)
        return real_load_batch(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(MemoryStreamStore, "headers_from", counted_headers_from)
    monkeypatch.setattr(MemoryStreamStore, "load_batch", counted_load_batch)
    # the same store opened again (a restart) reads no message for the window
    restarted = StreamStateMachine(store, cfg, sync_writes=False)
    assert not reads and restarted.dedup_window.stale
    # entries that need no window leave it unread, and what they change is in the store when it is read:
    # limits trim ids 0-4, a delete and a subject purge take two more, one message comes without an id
    later = [
        log(publish("s.b", b"m", T0 + 100, cfg)),
        *[log(publish("s.c", b"m", T0 + 101 + n, cfg)) for n in range(14)],
        log(DeleteMsg(seq=10).encode()),
        log(Purge(filter="s.b").encode()),
    ]
    restarted.apply(later)
    assert not reads and restarted.dedup_window.stale
    # a publish whose id is inside the window is caught; the window read is the one kept all along
    again = log(publish("s.a", b"m", T0 + 200, cfg, Nats_Msg_Id="id20"))
    assert restarted.apply([again]) == [Duplicate(21)]
    assert reads and not restarted.dedup_window.stale
    assert restarted.apply([log(publish("s.a", b"m", T0 + 201, cfg, Nats_Msg_Id="id9"))]) == [
        Stored(46, T0 + 201)
    ]


def test_the_lazily_read_window_is_the_one_a_replica_kept() -> None:
    cfg = normalize_stream_config(dataclasses.replace(CFG, max_msgs=25))
    store = MemoryStreamStore()
    kept, log = StreamStateMachine(MemoryStreamStore(), cfg, sync_writes=False), Log()
    restarted_from = StreamStateMachine(store, cfg, sync_writes=False)
    first = [log(publish("s.a", b"m", T0 + n * SECOND, cfg, Nats_Msg_Id=f"id{n % 23}")) for n in range(40)]
    kept.apply(first)
    restarted_from.apply(first)
    restarted = StreamStateMachine(store, cfg, sync_writes=False)
    rest = [
        log(DeleteMsg(seq=30).encode()),
        log(publish("s.b", b"m", T0 + 100 * SECOND, cfg)),
        log(Purge(filter="s.b").encode()),
    ]
    kept.apply(rest)
    restarted.apply(rest)
    assert restarted.dedup_window.stale
    assert restarted.dedup_window.items() == kept.dedup_window.items()
    # past the window (60 s after the last message) every id is forgotten on both
    late = log(publish("s.a", b"m", T0 + 200 * SECOND, cfg, Nats_Msg_Id="id5"))
    assert kept.apply([late]) == restarted.apply([late])


def test_the_metadata_value_is_the_json_of_the_machine_state() -> None:
    """The value written with every applied run is built from a cached config encoding: it must stay
    the JSON object orjson makes of the state, whatever the msg id, the sources and the flags hold."""
    cfg = normalize_stream_config(
        dataclasses.replace(CFG, sources=(StreamSource(name="ORIGIN"),), subjects=("s.>",))
    )
    m, log = machine(cfg), Log()

    def expected() -> bytes:
        return orjson.dumps(
            {
                "applied": m.applied_index,
                "last_msg_id": m.last_msg_id,
                "config": m.config.to_json(),
                "sources": m._sources,
                "republished": m.republished_through,
                "pristine": m._pristine,
            }
        )

    assert m.store.metadata is None and m._meta_bytes() == expected()  # pristine, nothing applied
    source = encode_headers([("Nats-Stream-Source", "ORIGIN 7 > > s.a")])
    m.apply([log(StoreMsg("s.a", source, b"x", T0).encode())])
    assert m._sources == {"ORIGIN > >": 7}
    m.apply([log(publish("s.a", b"1", T0 + 1, cfg, Nats_Msg_Id='quote " back \\ é \u2028 \x01'))])
    assert m.last_msg_id.startswith("quote")
    assert m.store.metadata == expected()
    m.apply([log(UpdateConfig(dataclasses.replace(cfg, max_msgs=5)).encode())])
    assert m.store.metadata == expected()
    assert orjson.loads(m.store.metadata)["config"]["max_msgs"] == 5
