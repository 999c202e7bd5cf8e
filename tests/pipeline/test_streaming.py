"""A streaming query over two restarts sees every message exactly once."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

from nats.js.api import StreamConfig

from tests.pipeline.servers import JetStreamTarget
from tests.pipeline.streams import Published, create_stream, publish, run


def event(offset: int):  # type: ignore[no-untyped-def]
    def factory(i: int) -> tuple[str, bytes, tuple[tuple[str, str], ...]]:
        n = offset + i
        return f"events.{n % 4}", f"event-{n}".encode(), ()

    return factory


def start_query(spark, target: JetStreamTarget, out: Path, checkpoint: Path, available_now: bool):  # type: ignore[no-untyped-def]
    stream = (
        spark.readStream.format("jetstream")
        .option("servers", target.servers)
        .option("stream", "EVENTS")
        .option("max_messages_per_trigger", "700")
        .option("partitions", "2")
        .load()
        .select("seq", "subject", "data")
    )
    writer = (
        stream.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
    )
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime="200 milliseconds")
    )
    return writer.start()


def test_streaming_query_over_two_restarts_sees_every_message_once(  # type: ignore[no-untyped-def]
    spark, single_target: JetStreamTarget, tmp_path: Path
) -> None:
    run(
        create_stream(
            single_target.urls, StreamConfig(name="EVENTS", subjects=["events.>"], allow_direct=True)
        )
    )
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    published: list[Published] = run(publish(single_target.urls, 1500, event(0)))

    first = start_query(spark, single_target, out, checkpoint, available_now=True)
    first.awaitTermination(120)
    assert first.exception() is None
    assert spark.read.parquet(str(out)).count() == 1500

    # Restart 1: a continuous query, stopped while a publisher is still writing.
    published += run(publish(single_target.urls, 1000, event(1500)))
    late: list[Published] = []
    publisher = threading.Thread(
        target=lambda: late.extend(run(publish(single_target.urls, 1500, event(2500))))
    )
    second = start_query(spark, single_target, out, checkpoint, available_now=False)
    try:
        publisher.start()
        second.processAllAvailable()
    finally:
        second.stop()
        publisher.join(60)
    assert not publisher.is_alive()
    published += late

    # Restart 2: picks up exactly where the checkpoint says.
    third = start_query(spark, single_target, out, checkpoint, available_now=True)
    third.awaitTermination(120)
    assert third.exception() is None

    rows = spark.read.parquet(str(out)).toArrow().to_pydict()
    counts = Counter(rows["seq"])
    assert [seq for seq, n in counts.items() if n > 1] == [], "no message read twice"
    expected = {p.seq: p for p in published}
    assert set(counts) == set(expected), "no message skipped"
    for seq, subject, data in zip(rows["seq"], rows["subject"], rows["data"], strict=True):
        assert (subject, data) == (expected[seq].subject, expected[seq].data)
