"""The Direct Get range reader against scripted responders: stale replicas, old servers, jetraft headers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import nats
import pytest

from pipeline.direct_get import DirectGetRangeReader, DirectMessage
from pipeline.errors import BatchNotSupportedError, DirectGetError, DirectGetNotAllowedError
from pipeline.nats_client import HeaderDict, RepeatedHeaders, connect
from tests.pipeline.fake_jetstream import FakeJetStream, FakeMessage, numbered_messages

FAST_RETRIES = (0.01, 0.01, 0.02, 0.02, 0.05)


async def read_all(
    fake: FakeJetStream, first: int, last: int, **kwargs: object
) -> tuple[list[DirectMessage], DirectGetRangeReader]:
    nc = await connect([fake.url], 2.0)
    reader = DirectGetRangeReader(
        nc,
        fake.stream,
        kwargs.pop("subject", None),  # type: ignore[arg-type]
        kwargs.pop("batch_size", 4),  # type: ignore[arg-type]
        1 << 20,
        kwargs.pop("timeout", 2.0),  # type: ignore[arg-type]
        kwargs.pop("min_last_seq", None),  # type: ignore[arg-type]
        stale_retry_delays=FAST_RETRIES,
    )
    got: list[DirectMessage] = []
    try:
        async for chunk in reader.read_range(first, last):
            got.extend(chunk)
    finally:
        await reader.close()
        await nc.close()
    return got, reader


@pytest.fixture
async def fake(core_nats: str) -> AsyncIterator[FakeJetStream]:
    stand_in = FakeJetStream(core_nats, "FAKE", numbered_messages(20))
    await stand_in.start()
    try:
        yield stand_in
    finally:
        await stand_in.stop()


async def test_reads_a_range_in_batches_following_eob(fake: FakeJetStream) -> None:
    got, reader = await read_all(fake, 3, 17)
    assert [m.seq for m in got] == list(range(3, 18))
    assert [m.data for m in got] == [f"m{s}".encode() for s in range(3, 18)]
    assert got[0].time == "2026-01-02T03:04:03.123456789Z"
    assert reader.requests == 4  # 15 messages, 4 per batch
    # Every batch asked for no more than the range still needs.
    assert [r["batch"] for r in fake.direct_requests] == [4, 4, 4, 3]


async def test_subject_filter_goes_to_next_by_subj(fake: FakeJetStream) -> None:
    got, _ = await read_all(fake, 1, 20, subject="fake.1")
    assert [m.seq for m in got] == [1, 4, 7, 10, 13, 16, 19]
    assert {r["next_by_subj"] for r in fake.direct_requests} == {"fake.1"}
    # Without Jetraft-Last-Sequence the replica's "nothing more" is checked with the leader.
    assert fake.leader_requests == [{"seq": 20, "next_by_subj": "fake.1"}]


async def test_a_replica_behind_is_asked_again_until_it_has_the_range(fake: FakeJetStream) -> None:
    fake.visible_last = 9
    fake.catch_up_after = 4
    got, reader = await read_all(fake, 1, 20)
    assert [m.seq for m in got] == list(range(1, 21)), "nothing skipped, nothing twice"
    assert reader.stale_retries >= 1
    assert fake.leader_requests, "the early end was checked with the leader's coherent MSG.GET"


async def test_an_empty_tail_is_confirmed_by_the_leader_not_trusted(fake: FakeJetStream) -> None:
    got, _ = await read_all(fake, 15, 30)
    assert [m.seq for m in got] == list(range(15, 21))
    assert fake.leader_requests == [{"seq": 21, "next_by_subj": ">"}]


async def test_a_replica_that_never_catches_up_fails_the_read(fake: FakeJetStream) -> None:
    fake.visible_last = 5
    with pytest.raises(DirectGetError, match="stayed behind sequence 6"):
        await read_all(fake, 1, 20)


async def test_server_without_batches_is_detected(fake: FakeJetStream) -> None:
    fake.batch_support = False
    with pytest.raises(BatchNotSupportedError, match="Nats-Num-Pending"):
        await read_all(fake, 1, 20)


async def test_jetraft_last_sequence_proves_the_range_without_asking_the_leader(fake: FakeJetStream) -> None:
    fake.jetraft_headers = True
    # fake.1 matches 1, 4, ..., 19: nothing in 20..20 matches, and the replica says it has up to 20.
    got, _ = await read_all(fake, 1, 20, subject="fake.1")
    assert [m.seq for m in got] == [1, 4, 7, 10, 13, 16, 19]
    assert {m.responder for m in got} == {"fake-1"}
    assert all(not any(name.startswith("Jetraft-") for name, _ in m.headers) for m in got)
    assert fake.leader_requests == []


async def test_min_last_seq_412_is_retried_until_the_replica_has_it(fake: FakeJetStream) -> None:
    fake.jetraft_headers = True
    fake.visible_last = 10
    fake.catch_up_after = 2
    got, reader = await read_all(fake, 1, 20, min_last_seq=20)
    assert [m.seq for m in got] == list(range(1, 21))
    assert reader.stale_retries >= 1
    assert all(r["min_last_seq"] == 20 for r in fake.direct_requests)
    assert fake.leader_requests == []


async def test_stream_without_direct_get_answers_503(fake: FakeJetStream, core_nats: str) -> None:
    other = FakeJetStream(core_nats, "NODIRECT", numbered_messages(3), allow_direct=False)
    await other.start()
    try:
        with pytest.raises(DirectGetNotAllowedError, match="allow_direct"):
            await read_all(other, 1, 3)
    finally:
        await other.stop()


async def test_stored_headers_keep_repeated_names_and_drop_responder_metadata(core_nats: str) -> None:
    message = FakeMessage(1, "fake.h", b"x", [("X-Tag", "a"), ("X-Tag", "b"), ("X-One", "1")])
    stand_in = FakeJetStream(core_nats, "HDRS", [message])
    await stand_in.start()
    try:
        got, _ = await read_all(stand_in, 1, 1)
    finally:
        await stand_in.stop()
    assert got[0].headers == [("X-Tag", "a"), ("X-Tag", "b"), ("X-One", "1")]


async def test_multi_value_headers_survive_nats_py_both_ways(core_nats: str) -> None:
    """Pins the nats-py hooks the pipeline relies on (Client._process_headers, headers.items())."""
    receiver = await connect([core_nats], 2.0)
    sender = await nats.connect(core_nats)
    try:
        sub = await receiver.subscribe("hdr.test")
        await receiver.flush()
        await sender.publish("hdr.test", b"p", headers=RepeatedHeaders([("A", "1"), ("A", "2"), ("B", "x")]))
        msg = await sub.next_msg(timeout=10)  # bounded; generous for a loaded CI machine
    finally:
        await sender.close()
        await receiver.close()
    assert isinstance(msg.headers, HeaderDict)
    assert msg.headers.fields == [("A", "1"), ("A", "2"), ("B", "x")]
    assert msg.headers["B"] == "x"


async def test_raw_subscriptions_get_bytes_straight_from_the_parser(core_nats: str) -> None:
    """Pins the nats-py hook bulk reads rely on (Client._process_msg), and that other subscriptions keep it."""
    receiver = await connect([core_nats], 2.0)
    sender = await nats.connect(core_nats)
    got: list[tuple[bytes, bytes | None, bytes]] = []
    try:
        raw = await receiver.subscribe_raw("raw.*", lambda *message: got.append(message))
        plain = await receiver.subscribe("plain")
        await receiver.flush()
        await sender.publish("raw.a", b"1", headers=RepeatedHeaders([("A", "1"), ("A", "2")]))
        await sender.publish("raw.b", b"2")
        await sender.publish("plain", b"3")
        msg = await plain.next_msg(timeout=10)  # bounded; generous for a loaded CI machine
        await receiver.unsubscribe_raw(raw)
    finally:
        await sender.close()
        await receiver.close()
    assert got == [(b"raw.a", b"NATS/1.0\r\nA: 1\r\nA: 2\r\n\r\n", b"1"), (b"raw.b", None, b"2")]
    assert msg.data == b"3"
