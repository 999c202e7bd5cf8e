"""Atomic batches (cluster/stream/atomic_batch.py): staging on the leader, and a batch entry applied whole
or not at all on every replica. nats-server's replies are compared in tests/node/test_atomic_batch.py."""

from __future__ import annotations

import dataclasses

import pytest

from cluster.api.errors import JSErrors
from cluster.stream.atomic_batch import (
    BATCH_TIMEOUT_NS,
    MAX_INFLIGHT_PER_STREAM,
    AbandonReason,
    AtomicBatches,
    BatchMsg,
    Commit,
    InflightBudget,
    Refused,
    Staged,
)
from cluster.stream.config import Discard, StreamConfig
from cluster.stream.config_check import normalize_stream_config
from cluster.stream.entries import EntryDecodeError, Rollup, StoreBatch, StoreMsg, decode_entry
from cluster.stream.machine import BatchStored, StreamStateMachine
from cluster.stream.publish import Rejected
from gateway.headers import decode_headers, encode_headers
from raft.types import Entry, EntryType
from storage.memory import MemoryStreamStore

SECOND = 1_000_000_000
T0 = 1_800_000_000 * SECOND
CFG = normalize_stream_config(
    StreamConfig(
        name="S", subjects=("s.>",), allow_atomic=True, allow_rollup_hdrs=True, duplicate_window=60 * SECOND
    )
)


def stage(
    batches: AtomicBatches,
    batch_id: str,
    seq: int,
    commit: str | None = None,
    now: int = T0,
    cfg: StreamConfig = CFG,
) -> Staged | Refused | Commit:
    fields = [("Nats-Batch-Id", batch_id), ("Nats-Batch-Sequence", str(seq))]
    if commit is not None:
        fields.append(("Nats-Batch-Commit", commit))
    header = encode_headers(fields)
    return batches.stage(cfg, batch_id, decode_headers(header), BatchMsg(f"s.{seq}", header, b"x"), now)


def test_a_batch_commits_its_messages_in_order_and_end_of_batch_marks_the_last() -> None:
    batches = AtomicBatches(InflightBudget())
    assert stage(batches, "b", 1) == Staged()
    assert stage(batches, "b", 2) == Staged()
    commit = stage(batches, "b", 3, "eob")
    assert isinstance(commit, Commit)
    assert [m.subject for m in commit.messages] == ["s.1", "s.2"]
    assert decode_headers(commit.messages[-1].header).get("Nats-Batch-Commit") == "1"
    assert decode_headers(commit.messages[0].header).get("Nats-Batch-Commit") is None
    assert len(batches) == 0


def test_a_batch_left_without_messages_is_abandoned_after_the_timeout() -> None:
    budget = InflightBudget()
    batches = AtomicBatches(budget)
    assert stage(batches, "b", 1, now=T0) == Staged()
    assert batches.next_deadline_ns() == T0 + BATCH_TIMEOUT_NS
    assert stage(batches, "b", 2, now=T0 + BATCH_TIMEOUT_NS - 1) == Staged()  # each message restarts it
    assert batches.expire(T0 + BATCH_TIMEOUT_NS) == []
    assert batches.expire(T0 + 2 * BATCH_TIMEOUT_NS) == ["b"]
    assert budget.count == 0
    refused = stage(batches, "b", 3, "1", now=T0 + 2 * BATCH_TIMEOUT_NS)
    assert refused == Refused(JSErrors.ATOMIC_PUBLISH_INCOMPLETE_BATCH())


def test_a_gap_abandons_the_batch_with_an_advisory_reason() -> None:
    batches = AtomicBatches(InflightBudget())
    stage(batches, "b", 1)
    assert stage(batches, "b", 3) == Refused(
        JSErrors.ATOMIC_PUBLISH_INCOMPLETE_BATCH(), AbandonReason.INCOMPLETE
    )
    # the batch is gone: its next message is no batch anyone knows
    assert stage(batches, "b", 2, "1") == Refused(JSErrors.ATOMIC_PUBLISH_INCOMPLETE_BATCH())


def test_batches_in_flight_are_limited_per_stream_and_per_node() -> None:
    budget = InflightBudget(limit=MAX_INFLIGHT_PER_STREAM + 10)
    first, second = AtomicBatches(budget), AtomicBatches(budget)
    for n in range(MAX_INFLIGHT_PER_STREAM):
        assert stage(first, f"b{n}", 1) == Staged()
    too_many = Refused(JSErrors.ATOMIC_PUBLISH_TOO_MANY_INFLIGHT())
    assert stage(first, "one-more", 1) == too_many
    for n in range(10):
        assert stage(second, f"b{n}", 1) == Staged()
    assert stage(second, "over-the-node", 1) == too_many
    first.clear()  # leadership lost: its batches give their share back
    assert budget.count == 10
    assert stage(second, "fits-again", 1) == Staged()


def test_a_stream_without_atomic_publish_refuses_batches() -> None:
    off = dataclasses.replace(CFG, allow_atomic=False)
    assert stage(AtomicBatches(InflightBudget()), "b", 1, cfg=off) == Refused(
        JSErrors.ATOMIC_PUBLISH_DISABLED()
    )


def _message(subject: str, ts: int = T0, **fields: object) -> StoreMsg:
    return StoreMsg(subject=subject, header=b"", payload=b"x", timestamp_ns=ts, **fields)  # type: ignore[arg-type]


def test_a_batch_entry_round_trips_and_truncation_is_detected() -> None:
    entry = StoreBatch("b1", (_message("s.1", msg_id="m1"), _message("s.2", expected_last_seq=4)))
    data = entry.encode()
    assert decode_entry(data) == entry
    with pytest.raises(EntryDecodeError):
        decode_entry(data[:-1])
    with pytest.raises(EntryDecodeError):
        decode_entry(data + b"\x00")


class _Log:
    def __init__(self) -> None:
        self.index = 0

    def __call__(self, data: bytes) -> Entry:
        self.index += 1
        return Entry(term=1, index=self.index, type=EntryType.NORMAL, data=data)


def _machine(cfg: StreamConfig = CFG) -> StreamStateMachine:
    return StreamStateMachine(MemoryStreamStore(), cfg, sync_writes=False)


def test_a_batch_is_stored_whole_under_one_timestamp() -> None:
    m, log = _machine(), _Log()
    (result,) = m.apply([log(StoreBatch("b", (_message("s.1", T0), _message("s.2", T0 + 5))).encode())])
    assert isinstance(result, BatchStored)
    assert [s.seq for s in result.stored] == [1, 2]
    assert {s.ts_ns for s in result.stored} == {T0}


@pytest.mark.parametrize(
    ("second", "error"),
    [
        (_message("s.2", msg_id="m1"), JSErrors.ATOMIC_PUBLISH_DUPLICATE_MSG_ID()),
        (_message("s.2", expected_last_seq=0), JSErrors.STREAM_WRONG_LAST_SEQUENCE(seq=1)),
        (_message("s.2", expected_last_seq=1), JSErrors.STREAM_WRONG_LAST_SEQUENCE_CONSTANT()),
        (_message("s.1", expected_last_subject_seq=0), JSErrors.STREAM_WRONG_LAST_SEQUENCE_CONSTANT()),
        (
            _message("s.1", rollup=Rollup.SUBJECT),
            JSErrors.STREAM_ROLLUP_FAILED(err="batch rollup sub invalid"),
        ),
        (_message("s.2", rollup=Rollup.ALL), JSErrors.STREAM_ROLLUP_FAILED(err="batch rollup all invalid")),
        (
            _message("s.2", expected_last_msg_id="m1"),
            JSErrors.ATOMIC_PUBLISH_UNSUPPORTED_HEADER(header="Nats-Expected-Last-Msg-Id"),
        ),
    ],
)
def test_one_failing_message_stores_none_of_the_batch(second: StoreMsg, error: object) -> None:
    m, log = _machine(), _Log()
    (result,) = m.apply([log(StoreBatch("b", (_message("s.1", msg_id="m1"), second)).encode())])
    assert result == Rejected(error)  # type: ignore[arg-type]
    assert m.store.state().messages == 0
    assert m.last_seq == 0


def test_a_discard_new_stream_takes_a_batch_only_if_all_of_it_fits() -> None:
    cfg = dataclasses.replace(CFG, max_msgs=2, discard=Discard.NEW)
    m, log = _machine(cfg), _Log()
    three = StoreBatch("b", tuple(_message(f"s.{n}") for n in range(3)))
    (result,) = m.apply([log(three.encode())])
    assert result == Rejected(JSErrors.STREAM_STORE_FAILED(err="maximum messages exceeded"))
    assert m.store.state().messages == 0
    (result,) = m.apply([log(StoreBatch("c", three.messages[:2]).encode())])
    assert isinstance(result, BatchStored)
    assert m.store.state().messages == 2


def test_a_batch_applied_after_atomic_publish_was_turned_off_is_refused() -> None:
    m, log = _machine(dataclasses.replace(CFG, allow_atomic=False)), _Log()
    (result,) = m.apply([log(StoreBatch("b", (_message("s.1"),)).encode())])
    assert result == Rejected(JSErrors.ATOMIC_PUBLISH_DISABLED())
    assert m.store.state().messages == 0
