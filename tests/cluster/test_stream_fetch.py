"""Fetch batches (how mirrors copy their origin) and the mirror's staleness measured from them."""

from __future__ import annotations

import pytest

from cluster.direct_get.staleness import StalenessTracker
from cluster.stream.fetch import FetchedMsg, decode_batch, encode_batch

MS = 1_000_000


def test_a_batch_round_trips_with_the_time_its_data_was_fresh_as_of() -> None:
    messages = [
        FetchedMsg(5, 111, "orders.a", b"NATS/1.0\r\nK: v\r\n\r\n", b"x"),
        FetchedMsg(7, 222, "o.b", b"", b""),
    ]
    batch = decode_batch(encode_batch(3, 9, messages, 1_700_000_000_123_456_789))
    assert (batch.first_seq, batch.last_seq, batch.fresh_as_of_ns) == (3, 9, 1_700_000_000_123_456_789)
    assert list(batch.messages) == messages


def test_a_truncated_batch_is_refused() -> None:
    data = encode_batch(1, 1, [FetchedMsg(1, 1, "a", b"", b"payload")], 5)
    with pytest.raises(ValueError):
        decode_batch(data[:-1])
    with pytest.raises(ValueError):
        decode_batch(data[:10])


def test_a_copy_is_as_stale_as_the_newest_answer_it_has_caught_up_with() -> None:
    # answers over a link lagging 300 ms: each says the origin had seq N as of 300 ms before it arrived
    tracker = StalenessTracker(started_ns=0)
    tracker.observe(10, 1_000 * MS)
    tracker.observe(12, 1_100 * MS)
    assert tracker.staleness_ns(10, 1_300 * MS) == 300 * MS
    assert tracker.staleness_ns(12, 1_400 * MS) == 300 * MS
    # behind every answer it has: counted as stale as the whole window (the safe side)
    assert tracker.staleness_ns(9, 1_400 * MS) > 1_400 * MS - 1_000 * MS
