"""The StreamStore contract, run against MemoryStreamStore and RocksStreamStore alike.

Expected numbers come from the deep dive's byte accounting and from the
nats-server traces in tests/traces (08 direct get, 09 purge/delete).
"""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from storage.config import DiscardPolicy, StoreConfig
from storage.errors import (
    CorruptStoreError,
    InvalidHeadersError,
    InvalidRequestError,
    InvalidSubjectError,
    Limit,
    LimitExceededError,
    MsgNotFoundError,
    MsgTooBigError,
    SequenceMismatchError,
    StoreClosedError,
    StoreEOFError,
    TooManyResultsError,
)
from storage.interface import StreamStore
from storage.memory import MemoryStreamStore
from storage.model import Rollup, SimpleState
from tests.storage.conftest import StoreFactory, counted_bytes

HDR = b"NATS/1.0\r\nX-Custom: yes\r\n\r\n"
SEC = 1_000_000_000


def fill_dget(store: StreamStore) -> None:
    """The DGET stream of trace 08, timestamps 1..7 seconds."""
    for ts, (subject, headers, payload) in enumerate(
        [
            ("dg.a", None, b"a1"),
            ("dg.b", HDR, b"b1"),
            ("dg.a", None, b"a2"),
            ("dg.c.x", None, b"cx1"),
            ("dg.c.y", None, b"cy1"),
            ("dg.a", None, b"a3"),
            ("dg.c.x", None, b"cx2"),
        ],
        start=1,
    ):
        store.store_msg(subject, headers, payload, ts * SEC)


def test_store_implements_protocol(store: StreamStore) -> None:
    assert isinstance(store, StreamStore)
    assert store.storage_type in ("memory", "file")


# -- storing and loading -------------------------------------------------------------------


def test_sequences_are_gap_free_and_timestamps_used_as_given(store: StreamStore) -> None:
    results = [store.store_msg("a.b", None, b"x", ts) for ts in (10, 20, 30)]
    assert [(r.seq, r.ts_ns, r.removed) for r in results] == [(1, 10, ()), (2, 20, ()), (3, 30, ())]
    msg = store.load_msg(2)
    assert (msg.subject, msg.headers, msg.payload, msg.seq, msg.ts_ns) == ("a.b", None, b"x", 2, 20)


def test_headers_are_returned_exactly_as_stored(store: StreamStore) -> None:
    store.store_msg("h.1", HDR, b"body", 1)
    store.store_msg("h.2", b"", b"body", 2)
    assert store.load_msg(1).headers == HDR
    assert store.load_msg(2).headers is None


def test_wall_clock_is_used_without_a_timestamp(store: StreamStore) -> None:
    import time

    before = time.time_ns()
    result = store.store_msg("a", None, b"")
    assert before <= result.ts_ns <= time.time_ns()
    assert store.load_msg(1).ts_ns == result.ts_ns


def test_byte_accounting_follows_nats_servers_stores(store: StreamStore) -> None:
    # nats-server's file store counts its record (30 bytes of framing and hash, 4 more with headers);
    # its memory store counts subject, headers and payload and 16 (a sequence and a timestamp)
    memory = isinstance(store, MemoryStreamStore)
    store.store_msg("a.bc", None, b"hello", 1)
    first = 4 + 5 + (16 if memory else 30)
    assert store.state().bytes == first
    store.store_msg("a.bc", HDR, b"hello", 2)
    assert store.state().bytes == first + first + len(HDR) + (0 if memory else 4)
    assert store.load_msg(2).size == 39 + 4 + len(HDR)  # a stored message's record, whatever its store


@pytest.mark.parametrize("subject", ["", "a..b", "a b", ".a", "a.", "a\tb"])
def test_invalid_subjects_are_rejected_and_nothing_is_stored(store: StreamStore, subject: str) -> None:
    with pytest.raises(InvalidSubjectError):
        store.store_msg(subject, None, b"x", 1)
    state = store.state()
    assert (state.messages, state.last_seq, state.bytes) == (0, 0, 0)


def test_wildcard_tokens_are_stored_as_literal_tokens(store: StreamStore) -> None:
    # as nats-server stores a message published on `a.*` (a KV key written with validation bypassed)
    for seq, subject in enumerate(["a.*", "a.>", "a.>.b", "*", "a.b"], start=1):
        assert store.store_msg(subject, None, b"x", seq).seq == seq
    assert store.load_msg(3).subject == "a.>.b"
    assert store.load_last_msg("a.*").subject == "a.b"  # a read's filter still has wildcards
    assert store.load_next_msg("a.>", 1).subject == "a.*"
    assert store.subjects_totals("a.*") == {"a.*": 1, "a.>": 1, "a.b": 1}


def test_subject_longer_than_the_record_allows_is_rejected(store: StreamStore) -> None:
    with pytest.raises(InvalidSubjectError):
        store.store_msg("a" * 70_000, None, b"x", 1)


@pytest.mark.parametrize("headers", [b"HTTP/1.1\r\n\r\n", b"NATS/1.0\r\nX: y", b"garbage"])
def test_malformed_header_blocks_are_rejected(store: StreamStore, headers: bytes) -> None:
    with pytest.raises(InvalidHeadersError):
        store.store_msg("a", headers, b"x", 1)
    assert store.state().messages == 0


@pytest.mark.parametrize("filter_", ["a..b", "a.>.b", "a b"])
def test_invalid_filters_are_rejected_on_reads(store: StreamStore, filter_: str) -> None:
    store.store_msg("a.b", None, b"x", 1)
    with pytest.raises(InvalidSubjectError):
        store.load_next_msg(filter_, 1)
    with pytest.raises(InvalidSubjectError):
        store.num_pending(1, filter_)
    with pytest.raises(InvalidSubjectError):
        store.multi_last_seqs([filter_])


def test_bad_numbers_are_rejected(store: StreamStore) -> None:
    store.store_msg("a", None, b"x", 1)
    with pytest.raises(InvalidRequestError):
        store.load_msg(-1)
    with pytest.raises(InvalidRequestError):
        store.purge_ex("a", keep=-1)
    with pytest.raises(InvalidRequestError):
        store.load_batch("a", 1, 0)
    # A store compiled by mypyc (setup.py) checks its arguments' declared types at the call and raises
    # TypeError before any of its code runs; as Python, the store's own check raises InvalidRequestError.
    refused = TypeError if _is_compiled(type(store)) else InvalidRequestError
    with pytest.raises(refused):
        store.store_msg("a", None, "text", 2)  # type: ignore[arg-type]
    assert store.state().messages == 1


def _is_compiled(store_class: type) -> bool:
    return not (sys.modules[store_class.__module__].__file__ or "").endswith(".py")


def test_missing_messages_raise_not_found(store: StreamStore) -> None:
    with pytest.raises(MsgNotFoundError):
        store.load_msg(1)
    store.store_msg("a", None, b"x", 1)
    store.remove_msg(1)
    with pytest.raises(MsgNotFoundError):
        store.load_msg(1)
    with pytest.raises(MsgNotFoundError):
        store.load_last_msg("a")
    with pytest.raises(MsgNotFoundError):
        store.subject_for_seq(1)


# -- Direct Get reads (trace 08) -----------------------------------------------------------


def test_next_by_subject_literal_and_wildcard(store: StreamStore) -> None:
    fill_dget(store)
    assert store.load_next_msg("dg.a", 2).seq == 3
    assert store.load_next_msg("dg.c.*", 1).payload == b"cx1"
    assert store.load_next_msg("", 5).seq == 5
    assert store.load_next_msg("dg.>", 7).seq == 7
    with pytest.raises(StoreEOFError):
        store.load_next_msg("dg.b", 3)
    with pytest.raises(MsgNotFoundError):
        store.load_next_msg("dg.none", 1)


def test_last_by_subject_and_filter(store: StreamStore) -> None:
    fill_dget(store)
    assert store.load_last_msg("dg.a").seq == 6
    assert store.load_last_msg("dg.c.*").seq == 7
    assert store.load_last_msg(">").seq == 7
    store.remove_msg(7)
    assert store.load_last_msg("").seq == 6
    assert store.load_last_msg("dg.c.>").seq == 5


def test_batch_with_num_pending_like_direct_get(store: StreamStore) -> None:
    fill_dget(store)
    batch = store.load_batch("", 1, 3)
    assert [m.seq for m in batch.messages] == [1, 2, 3]
    assert batch.num_pending == 4
    past_end = store.load_batch(">", 5, 10)
    assert [m.seq for m in past_end.messages] == [5, 6, 7]
    assert past_end.num_pending == 0
    assert store.num_pending(1, "") == 7
    assert store.num_pending(5, "") == 3


def test_headers_from_lists_the_messages_that_have_headers(store: StreamStore) -> None:
    with store.write_group():
        for n in range(1, 11):
            headers = b"NATS/1.0\r\nNats-Msg-Id: m%d\r\n\r\n" % n if n % 2 else None
            store.store_msg(f"h.{n % 3}", headers, b"p" * n, 1000 + n)
    store.remove_msg(5)
    with store.write_group():
        # inside a write group: its own records and removals count before they are written
        store.store_msg("h.new", b"NATS/1.0\r\nNats-Msg-Id: m11\r\n\r\n", b"late", 2000)
        store.remove_msg(7)
        found = store.headers_from(3)
        assert [(seq, ts) for seq, ts, _ in found] == [(3, 1003), (9, 1009), (11, 2000)]
        assert found[-1][2] == b"NATS/1.0\r\nNats-Msg-Id: m11\r\n\r\n"
    assert [seq for seq, _, _ in store.headers_from(0)] == [1, 3, 9, 11]
    assert store.headers_from(12) == []


def test_batch_max_bytes_sends_the_message_that_crosses(store: StreamStore) -> None:
    fill_dget(store)
    # dg.a + a1 = 6 bytes; dg.b + headers + b1 crosses 10.
    batch = store.load_batch(">", 1, 10, max_bytes=10)
    assert [m.seq for m in batch.messages] == [1, 2]
    assert batch.num_pending == 5
    exact = store.load_batch(">", 1, 10, max_bytes=6)
    assert [m.seq for m in exact.messages] == [1]


def test_multi_last_matches_trace(store: StreamStore) -> None:
    fill_dget(store)
    assert store.multi_last_seqs(["dg.>"]) == [2, 5, 6, 7]
    assert store.multi_last_seqs(["dg.a", "dg.c.*"], 5) == [3, 4, 5]
    assert store.multi_last_seqs(["dg.a", "dg.a", "dg.>"]) == [2, 5, 6, 7]
    assert store.multi_last_seqs(["dg.none"]) == []


def test_multi_last_up_to_time(store: StreamStore) -> None:
    fill_dget(store)
    # Stored before 5.5 s: sequences 1..5.
    assert store.multi_last_seqs(["dg.>"], up_to_ts_ns=5 * SEC + SEC // 2) == [2, 3, 4, 5]
    # Exactly at 5 s excludes sequence 5 (up-to-time is "before").
    assert store.multi_last_seqs(["dg.>"], up_to_ts_ns=5 * SEC) == [2, 3, 4]
    assert store.multi_last_seqs(["dg.>"], up_to_ts_ns=SEC) == []
    with pytest.raises(InvalidRequestError):
        store.multi_last_seqs(["dg.>"], 3, up_to_ts_ns=SEC)


def test_multi_last_over_1024_subjects_is_too_many(store: StreamStore) -> None:
    for i in range(1025):
        store.store_msg(f"dg.many.{i}", None, b"", i + 1)
    with pytest.raises(TooManyResultsError):
        store.multi_last_seqs(["dg.many.*"])
    assert len(store.multi_last_seqs(["dg.many.*"], 1024)) == 1024
    assert len(store.multi_last_seqs(["dg.many.*"], max_allowed=2000)) == 1025


def test_first_seq_at_or_after_time(store: StreamStore) -> None:
    assert store.get_seq_from_time(5) == 1
    fill_dget(store)
    assert store.get_seq_from_time(0) == 1
    assert store.get_seq_from_time(3 * SEC + 1) == 4
    assert store.get_seq_from_time(4 * SEC) == 4
    assert store.get_seq_from_time(7 * SEC) == 7
    assert store.get_seq_from_time(8 * SEC) == 8
    store.remove_msg(4)
    store.remove_msg(5)
    assert store.get_seq_from_time(3 * SEC + 1) == 6


def test_filtered_and_subject_states(store: StreamStore) -> None:
    fill_dget(store)
    assert store.filtered_state(1, "dg.a") == SimpleState(3, 1, 6)
    assert store.filtered_state(2, "dg.a") == SimpleState(2, 3, 6)
    assert store.filtered_state(4, "dg.c.*") == SimpleState(3, 4, 7)
    assert store.filtered_state(8, ">") == SimpleState()
    assert store.subjects_totals("dg.c.>") == {"dg.c.x": 2, "dg.c.y": 1}
    assert store.subjects_state("dg.a") == {"dg.a": SimpleState(3, 1, 6)}
    assert store.num_pending(4, "dg.>", last_per_subject=True) == 3
    assert store.num_pending(3, "dg.a") == 2


# -- removal, purge, compact (trace 09) ----------------------------------------------------


def test_purge_and_delete_match_trace(store: StreamStore) -> None:
    for seq in range(1, 9):
        store.store_msg("purge.a" if seq % 2 else "purge.b", None, b"xx", seq)
    store.store_msg("purge.c", None, b"xx", 9)
    for seq in range(10, 14):
        store.store_msg("purge.d", None, b"xx", seq)

    assert store.purge_ex("purge.a") == 4
    assert store.purge_ex("purge.b", keep=1) == 3
    state = store.state()
    one = counted_bytes(store, "purge.a", None, b"xx")
    assert (state.messages, state.bytes, state.first_seq, state.last_seq, state.num_subjects) == (
        6,
        6 * one,
        8,
        13,
        3,
    )

    assert store.remove_msg(9) is True
    assert store.remove_msg(9) is False
    assert store.remove_msg(10) is True
    state = store.state(include_deleted=True)
    assert (state.messages, state.bytes, state.num_subjects, state.num_deleted) == (4, 4 * one, 2, 2)
    assert state.deleted == (9, 10)

    assert store.purge_ex(seq=12) == 2
    assert store.purge() == 2
    state = store.state()
    assert (state.messages, state.first_seq, state.last_seq, state.first_ts_ns, state.last_ts_ns) == (
        0,
        14,
        13,
        0,
        13,
    )
    api = state.to_api()
    assert api["first_ts"] == "0001-01-01T00:00:00Z"
    assert "num_deleted" not in api and "num_subjects" not in api
    assert store.store_msg("purge.e", None, b"", 14).seq == 14


def test_purge_ex_keep_on_whole_stream_keeps_newest_by_count(store: StreamStore) -> None:
    for seq in range(1, 11):
        store.store_msg(f"k.{seq % 3}", None, b"", seq)
    store.remove_msg(9)
    assert store.purge_ex(keep=3) == 6
    assert [store.load_next_msg(">", 1).seq, store.state().messages] == [7, 3]


def test_purge_ex_with_subject_and_sequence(store: StreamStore) -> None:
    for seq in range(1, 9):
        store.store_msg("p.a" if seq % 2 else "p.b", None, b"", seq)
    assert store.purge_ex("p.a", seq=5) == 2
    assert store.subjects_totals("p.a") == {"p.a": 2}
    assert store.purge_ex("p.*", seq=1) == 0


def test_compact_below_and_past_the_end(store: StreamStore) -> None:
    for seq in range(1, 6):
        store.store_msg("c", None, b"", seq)
    assert store.compact(3) == 2
    assert store.state().first_seq == 3
    assert store.compact(2) == 0
    assert store.compact(10) == 3
    state = store.state()
    assert (state.messages, state.first_seq, state.last_seq) == (0, 10, 9)
    assert store.store_msg("c", None, b"", 6).seq == 10


def test_truncate_removes_the_tail(store: StreamStore) -> None:
    for seq in range(1, 6):
        store.store_msg(f"t.{seq}", None, b"", seq * 10)
    store.truncate(3)
    state = store.state()
    assert (state.messages, state.last_seq, state.last_ts_ns, state.num_subjects) == (3, 3, 30, 3)
    assert store.store_msg("t.new", None, b"", 99).seq == 4
    with pytest.raises(InvalidRequestError):
        store.truncate(9)
    store.truncate(0)
    assert store.state().messages == 0
    assert store.store_msg("t", None, b"", 1).seq == 1


def test_removing_the_first_message_moves_first_seq(store: StreamStore) -> None:
    for seq in range(1, 5):
        store.store_msg("r", None, b"", seq * 10)
    store.remove_msg(2)
    store.remove_msg(1)
    state = store.state()
    assert (state.first_seq, state.first_ts_ns, state.num_deleted) == (3, 30, 0)
    assert store.erase_msg(3) is True
    assert store.erase_msg(3) is False
    assert store.state().first_seq == 4


# -- skips and raw stores (mirrors) --------------------------------------------------------


def test_skip_in_empty_store_moves_first_seq(store: StreamStore) -> None:
    assert store.skip_msg() == 1
    store.skip_msgs(2, 3)
    state = store.state()
    assert (state.first_seq, state.last_seq, state.num_deleted) == (5, 4, 0)
    with pytest.raises(SequenceMismatchError):
        store.skip_msg(9)
    assert store.store_msg("s", None, b"", 1).seq == 5


def test_skip_in_non_empty_store_leaves_deleted(store: StreamStore) -> None:
    store.store_msg("s", None, b"", 1)
    store.skip_msgs(2, 2)
    store.store_msg("s", None, b"", 2)
    state = store.state(include_deleted=True)
    assert (state.first_seq, state.last_seq, state.deleted) == (1, 4, (2, 3))


def test_raw_store_keeps_origin_sequences(store: StreamStore) -> None:
    store.store_raw_msg("m", None, b"", 5, 100)
    store.store_raw_msg("m", None, b"", 9, 200)
    state = store.state(include_deleted=True)
    assert (state.first_seq, state.last_seq, state.messages, state.deleted) == (5, 9, 2, (6, 7, 8))
    assert store.load_msg(9).ts_ns == 200
    with pytest.raises(SequenceMismatchError):
        store.store_raw_msg("m", None, b"", 9, 300)
    assert store.store_msg("m", None, b"", 300).seq == 10


# -- limits --------------------------------------------------------------------------------


def test_max_msgs_discard_old_removes_oldest(make_store: StoreFactory) -> None:
    store = make_store(StoreConfig(max_msgs=3))
    removed = [store.store_msg("l", None, b"", seq).removed for seq in range(1, 6)]
    assert removed == [(), (), (), (1,), (2,)]
    assert store.state().first_seq == 3


def test_max_bytes_discard_old(make_store: StoreFactory) -> None:
    store = make_store(StoreConfig(max_bytes=100))
    fits = 100 // counted_bytes(store, "b", None, b"0123456789")  # 2 in a file store, 3 in memory
    for seq in range(1, fits + 2):
        store.store_msg("b", None, b"0123456789", seq)
    assert store.state().messages == fits
    big = store.store_msg("b", None, b"x" * 200, fits + 2)
    # Larger than the limit: stored, then trimmed with everything else.
    assert big.removed == tuple(range(2, fits + 3))
    assert store.state().messages == 0


def test_max_msgs_per_subject_keeps_history(make_store: StoreFactory) -> None:
    store = make_store(StoreConfig(max_msgs_per_subject=2))
    for seq, key in enumerate(["k1", "k2", "k1", "k1", "k2", "k1"], start=1):
        store.store_msg(f"$KV.b.{key}", None, b"", seq)
    assert store.subjects_state("$KV.b.*") == {
        "$KV.b.k1": SimpleState(2, 4, 6),
        "$KV.b.k2": SimpleState(2, 2, 5),
    }


def test_max_msgs_per_subject_one_keeps_only_the_latest_of_each_key(make_store: StoreFactory) -> None:
    store = make_store(StoreConfig(max_msgs_per_subject=1))
    for seq, key in enumerate(["k1", "k2", "k3", "k2", "k1", "k1", "k3"], start=1):
        store.store_msg(f"$KV.b.{key}", None, b"", seq)
    assert store.subjects_state("$KV.b.*") == {
        "$KV.b.k1": SimpleState(1, 6, 6),
        "$KV.b.k2": SimpleState(1, 4, 4),
        "$KV.b.k3": SimpleState(1, 7, 7),
    }
    assert store.load_last_msg("$KV.b.k2").seq == 4


def test_discard_new_refuses_and_stores_nothing(make_store: StoreFactory) -> None:
    store = make_store(StoreConfig(max_msgs=2, discard=DiscardPolicy.NEW))
    store.store_msg("n", None, b"", 1)
    store.store_msg("n", None, b"", 2)
    with pytest.raises(LimitExceededError) as info:
        store.store_msg("n", None, b"", 3)
    assert info.value.limit is Limit.MAX_MSGS
    assert store.state().last_seq == 2

    probe = make_store()
    one = counted_bytes(probe, "n", None, b"x" * 10)
    by_bytes = make_store(StoreConfig(max_bytes=one + one // 2, discard=DiscardPolicy.NEW))
    by_bytes.store_msg("n", None, b"x" * 10, 1)
    with pytest.raises(LimitExceededError) as info:
        by_bytes.store_msg("n", None, b"x" * 10, 2)
    assert info.value.limit is Limit.MAX_BYTES


def test_discard_new_at_subject_limit_replaces(make_store: StoreFactory) -> None:
    store = make_store(StoreConfig(max_msgs=2, max_msgs_per_subject=1, discard=DiscardPolicy.NEW))
    store.store_msg("a", None, b"", 1)
    store.store_msg("b", None, b"", 2)
    assert store.store_msg("a", None, b"", 3).removed == (1,)
    with pytest.raises(LimitExceededError):
        store.store_msg("c", None, b"", 4)

    per_subject = make_store(
        StoreConfig(max_msgs_per_subject=1, discard=DiscardPolicy.NEW, discard_new_per_subject=True)
    )
    per_subject.store_msg("a", None, b"", 1)
    with pytest.raises(LimitExceededError) as info:
        per_subject.store_msg("a", None, b"", 2)
    assert info.value.limit is Limit.MAX_MSGS_PER_SUBJECT
    # A rollup is let through: it restores the limit itself.
    assert per_subject.store_msg("a", None, b"", 3, rollup=Rollup.SUBJECT).removed == (1,)


def test_max_msg_size(make_store: StoreFactory) -> None:
    store = make_store(StoreConfig(max_msg_size=10))
    store.store_msg("a", None, b"x" * 10, 1)
    with pytest.raises(MsgTooBigError) as info:
        store.store_msg("a", b"NATS/1.0\r\n\r\n", b"x" * 1, 2)
    assert (info.value.size, info.value.max_size) == (13, 10)
    assert store.state().messages == 1


def test_max_age_expiry_is_driven_by_the_host_and_by_writes(make_store: StoreFactory) -> None:
    store = make_store(StoreConfig(max_age_ns=10 * SEC))
    assert store.next_expiry_ns() is None
    for seq in range(1, 4):
        store.store_msg("e", None, b"", seq * SEC)
    assert store.next_expiry_ns() == 11 * SEC
    assert store.expire(11 * SEC - 1) == ()
    assert store.expire(12 * SEC) == (1, 2)
    assert store.next_expiry_ns() == 13 * SEC
    result = store.store_msg("e", None, b"", 30 * SEC)
    assert result.removed == (3,)
    assert store.state().messages == 1


def test_a_subject_rollup_on_a_subject_with_wildcard_tokens_clears_every_subject_it_matches(
    store: StreamStore,
) -> None:
    """As nats-server purges by it: a KV purge of `hello.*` (key validation bypassed) clears the keys
    `hello.<anything>` and keeps only itself; other subjects stay."""
    for i, subject in enumerate(["kv.hello", "kv.hello.1", "kv.hello.2", "kv.hello.1", "kv.other.1"], 1):
        store.store_msg(subject, None, b"", i)
    result = store.store_msg("kv.hello.*", None, b"", 6, rollup=Rollup.SUBJECT)
    assert result.removed == (2, 3, 4)
    assert [store.load_msg(seq).subject for seq in (1, 5, 6)] == ["kv.hello", "kv.other.1", "kv.hello.*"]
    assert store.state().messages == 3
    # a literal subject rolls up only itself
    assert store.store_msg("kv.other.1", None, b"", 7, rollup=Rollup.SUBJECT).removed == (5,)


def test_rollup_subject_and_all(store: StreamStore) -> None:
    for seq, subject in enumerate(["r.a", "r.b", "r.a", "r.b", "r.a"], start=1):
        store.store_msg(subject, None, b"", seq)
    assert store.store_msg("r.a", None, b"", 6, rollup=Rollup.SUBJECT).removed == (1, 3, 5)
    assert store.subjects_totals(">") == {"r.a": 1, "r.b": 2}
    assert store.store_msg("r.c", None, b"", 7, rollup=Rollup.ALL).removed == (2, 4, 6)
    state = store.state()
    assert (state.messages, state.first_seq) == (1, 7)


def test_update_config_tightening_trims_at_once(store: StreamStore) -> None:
    for seq in range(1, 11):
        store.store_msg(f"u.{seq % 2}", None, b"", seq * SEC)
    removed = store.update_config(StoreConfig(max_msgs=6, max_msgs_per_subject=2))
    assert removed == (1, 2, 3, 4, 5, 6)
    assert store.config.max_msgs == 6
    assert store.update_config(StoreConfig(max_age_ns=2 * SEC), now_ns=11 * SEC) == (7, 8, 9)


def test_config_normalises_like_nats_server() -> None:
    config = StoreConfig.from_stream_config(
        {"max_msgs": 0, "max_bytes": -1, "max_age": 5, "discard": "new", "max_msgs_per_subject": 3}
    )
    assert (config.max_msgs, config.max_age_ns, config.discard, config.max_msgs_per_subject) == (
        -1,
        5,
        DiscardPolicy.NEW,
        3,
    )
    from storage.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError):
        StoreConfig(max_msgs=-5)
    with pytest.raises(InvalidConfigError):
        StoreConfig(discard="sideways")  # type: ignore[arg-type]


# -- state, groups, lifecycle --------------------------------------------------------------


def test_state_uses_nats_field_names(store: StreamStore) -> None:
    store.store_msg("s.a", None, b"x", 1_700_000_000_123_456_789)
    store.store_msg("s.b", None, b"x", 1_700_000_001_000_000_000)
    store.store_msg("s.b", None, b"x", 1_700_000_002_500_000_000)
    store.remove_msg(2)
    api = store.state(include_deleted=True).to_api()
    assert api == {
        "messages": 2,
        "bytes": 2 * counted_bytes(store, "s.a", None, b"x"),
        "first_seq": 1,
        "first_ts": "2023-11-14T22:13:20.123456789Z",
        "last_seq": 3,
        "last_ts": "2023-11-14T22:13:22.5Z",
        "num_subjects": 2,
        "num_deleted": 1,
        "deleted": [2],
    }


def test_write_group_metadata(store: StreamStore) -> None:
    assert store.metadata is None
    with store.write_group(sync=True) as group:
        store.store_msg("g", None, b"", 1)
        store.store_msg("g", None, b"", 2)
        assert store.load_msg(2).seq == 2
        group.meta = (7).to_bytes(8, "big")
    assert store.metadata == (7).to_bytes(8, "big")
    assert store.state().messages == 2
    store.sync()


def test_closed_store_refuses_everything(store: StreamStore) -> None:
    store.store_msg("c", None, b"", 1)
    store.close()
    assert store.closed
    with pytest.raises(StoreClosedError):
        store.load_msg(1)
    with pytest.raises(StoreClosedError):
        store.store_msg("c", None, b"", 2)
    store.close()


# -- snapshots ------------------------------------------------------------------------------


def test_snapshot_round_trip_between_both_kinds(make_store: StoreFactory) -> None:
    source = make_store(StoreConfig(max_msgs_per_subject=5))
    fill_dget(source)
    source.remove_msg(3)
    source.skip_msgs(8, 2)
    with source.write_group() as group:
        group.meta = b"applied-42"
    chunks = list(source.snapshot())
    for target in (make_store(), MemoryStreamStore()):
        target.store_msg("old.stuff", None, b"gone", 1)
        target.restore(iter(chunks))
        restored, original = target.state(include_deleted=True), source.state(include_deleted=True)
        assert replace(restored, bytes=0) == replace(original, bytes=0)
        live = [seq for seq in range(original.first_seq, original.last_seq + 1) if seq not in original.deleted]
        assert restored.bytes == sum(
            counted_bytes(target, msg.subject, msg.headers, msg.payload) for msg in map(source.load_msg, live)
        )
        assert target.metadata == b"applied-42"
        assert target.config == source.config
        assert target.load_msg(2) == source.load_msg(2)
        assert target.store_msg("dg.z", None, b"", 99 * SEC).seq == 10


def test_snapshot_of_empty_purged_store(store: StreamStore) -> None:
    store.store_msg("x", None, b"", 1)
    store.purge()
    target = MemoryStreamStore()
    target.restore(store.snapshot())
    state = target.state()
    assert (state.messages, state.first_seq, state.last_seq) == (0, 2, 1)


def test_corrupt_or_cut_snapshot_is_refused(make_store: StoreFactory) -> None:
    source = make_store()
    fill_dget(source)
    data = b"".join(source.snapshot())
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0xFF
    for bad in (data[:-5], bytes(flipped), b"not a snapshot at all", data + b"x"):
        target = make_store()
        with pytest.raises(CorruptStoreError):
            target.restore([bad])
        # Whatever it held, the target is usable afterwards.
        target.store_msg("after", None, b"", 1)
        assert target.load_last_msg("after").payload == b""
