"""Batch reads through Spark with the `start_time` and `min_last_seq` options."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import nats
import pytest
from nats.js.api import StreamConfig

from pipeline.options import ReadOptions
from tests.pipeline.servers import JetStreamTarget
from tests.pipeline.streams import Published, create_stream, publish, run

EARLY = 40
LATE = 30


@dataclass(frozen=True)
class TimedStream:
    published: list[Published]
    first_late_seq: int
    first_late_stamp: str  # Nats-Time-Stamp of the first late message, nanoseconds as the server sent it


def timed_message(offset: int):  # type: ignore[no-untyped-def]
    def factory(i: int) -> tuple[str, bytes, tuple[tuple[str, str], ...]]:
        n = offset + i
        return f"timed.{'odd' if n % 2 else 'even'}", f"t-{n}".encode(), ()

    return factory


async def stored_stamp(servers: list[str], stream: str, seq: int) -> str:
    """The stored time of one message, read through nats-py's own Direct Get (not the data source)."""
    nc = await nats.connect(servers)
    try:
        msg = await nc.jetstream().get_msg(stream, seq=seq, direct=True)
        assert msg.headers is not None
        return str(msg.headers["Nats-Time-Stamp"])
    finally:
        await nc.close()


@pytest.fixture(scope="module")
def timed(single_target: JetStreamTarget) -> TimedStream:
    """Two publish rounds on separate connections: the late round is stamped after the early one."""
    run(create_stream(single_target.urls, StreamConfig(name="TIMED", subjects=["timed.>"], allow_direct=True)))
    published = run(publish(single_target.urls, EARLY, timed_message(0)))
    published += run(publish(single_target.urls, LATE, timed_message(EARLY)))
    first_late = published[EARLY].seq
    stamp = run(stored_stamp(single_target.urls, "TIMED", first_late))
    before = run(stored_stamp(single_target.urls, "TIMED", first_late - 1))
    # start_time keeps microseconds: the test needs the rounds apart at that precision.
    assert ReadOptions.parse({"servers": "x:1", "stream": "T", "start_time": before}).start_time < (
        ReadOptions.parse({"servers": "x:1", "stream": "T", "start_time": stamp}).start_time
    )
    return TimedStream(published, first_late, stamp)


def read_timed(spark, target: JetStreamTarget, **options: str):  # type: ignore[no-untyped-def]
    reader = spark.read.format("jetstream").option("servers", target.servers).option("stream", "TIMED")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load().select("seq", "subject", "data").toArrow().to_pydict()


def test_start_time_reads_from_the_first_message_at_that_time(  # type: ignore[no-untyped-def]
    spark, single_target: JetStreamTarget, timed: TimedStream
) -> None:
    got = read_timed(spark, single_target, start_time=timed.first_late_stamp, partitions="2")
    late = [p for p in timed.published if p.seq >= timed.first_late_seq]
    assert got["seq"] == [p.seq for p in late]
    assert got["data"] == [p.data for p in late]


def test_start_time_with_a_subject_filter(spark, single_target: JetStreamTarget, timed: TimedStream) -> None:  # type: ignore[no-untyped-def]
    got = read_timed(spark, single_target, start_time=timed.first_late_stamp, subject="timed.odd")
    want = [p for p in timed.published if p.seq >= timed.first_late_seq and p.subject == "timed.odd"]
    assert got["seq"] == [p.seq for p in want]
    assert set(got["subject"]) == {"timed.odd"}


def test_start_time_after_the_last_message_reads_nothing(  # type: ignore[no-untyped-def]
    spark, single_target: JetStreamTarget, timed: TimedStream
) -> None:
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert read_timed(spark, single_target, start_time=tomorrow)["seq"] == []


def test_min_last_seq_read(spark, single_target: JetStreamTarget, timed: TimedStream) -> None:  # type: ignore[no-untyped-def]
    last = timed.published[-1].seq
    # Every responder already holds `last`, so the read-your-writes floor is met at once.
    got = read_timed(spark, single_target, min_last_seq=str(last), start_seq="5", partitions="3")
    assert got["seq"] == [p.seq for p in timed.published if p.seq >= 5]
    assert got["data"] == [p.data for p in timed.published if p.seq >= 5]
