"""The jetstream sink: rows published with PubAcks, and deduplicated when a write runs again."""

from __future__ import annotations

import nats
import pytest
from nats.js.api import StreamConfig
from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructField, StructType

from tests.pipeline.servers import JetStreamTarget
from tests.pipeline.streams import create_stream, run

ROWS = 3000


def read_stream(spark, target: JetStreamTarget, stream: str):  # type: ignore[no-untyped-def]
    return spark.read.format("jetstream").option("servers", target.servers).option("stream", stream).load()


@pytest.fixture(scope="module")
def sink_stream(single_target: JetStreamTarget) -> str:
    run(create_stream(single_target.urls, StreamConfig(name="SINK", subjects=["sink.>"], allow_direct=True)))
    return "SINK"


def test_sink_run_twice_stores_each_row_once(spark, single_target: JetStreamTarget, sink_stream: str) -> None:  # type: ignore[no-untyped-def]
    schema = StructType(
        [
            StructField("subject", StringType()),
            StructField("data", StringType()),
            StructField("headers", MapType(StringType(), ArrayType(StringType()))),
        ]
    )
    rows = [
        (f"sink.rows.{i % 3}", f"row-{i}", {"X-Row": [str(i)], "X-Tag": ["a", "b"]} if i % 5 == 0 else None)
        for i in range(ROWS)
    ]
    # Duplicate rows are legitimate data: they must be stored twice, not deduplicated.
    rows[1] = rows[2] = ("sink.rows.0", "same", None)
    df = spark.createDataFrame(rows, schema).repartition(4)
    for _ in range(2):
        df.write.format("jetstream").mode("append").option("servers", single_target.servers).option(
            "max_in_flight", "64"
        ).save()

    stored = (
        read_stream(spark, single_target, sink_stream)
        .where("subject like 'sink.rows.%'")
        .toArrow()
        .to_pylist()
    )
    assert len(stored) == ROWS
    got = sorted((row["subject"], row["data"].decode()) for row in stored)
    assert got == sorted((subject, data) for subject, data, _ in rows)
    msg_ids = [dict(row["headers"])["Nats-Msg-Id"][0] for row in stored]
    assert all(msg_ids) and len(set(msg_ids)) == ROWS
    tagged = [dict(row["headers"]) for row in stored if "X-Row" in dict(row["headers"])]
    assert len(tagged) == len([r for r in rows if r[2]])
    assert all(headers["X-Tag"] == ["a", "b"] for headers in tagged)


def test_sink_with_subject_option_and_binary_data(
    spark, single_target: JetStreamTarget, sink_stream: str
) -> None:  # type: ignore[no-untyped-def]
    schema = StructType([StructField("data", BinaryType())])
    payloads = [bytes([i % 256]) * (i % 17) for i in range(200)]
    df = spark.createDataFrame([(p,) for p in payloads], schema)
    df.write.format("jetstream").mode("append").option("servers", single_target.servers).option(
        "subject", "sink.binary"
    ).save()
    stored = read_stream(spark, single_target, sink_stream).where("subject = 'sink.binary'").select("data")
    assert sorted(r.data for r in stored.collect()) == sorted(payloads)


def test_sink_refuses_a_subject_no_stream_captures(spark, single_target: JetStreamTarget) -> None:  # type: ignore[no-untyped-def]
    df = spark.createDataFrame([("x",)], "data string")
    with pytest.raises(Exception, match=r"no stream captures subject 'nowhere.at.all'"):
        df.write.format("jetstream").mode("append").option("servers", single_target.servers).option(
            "subject", "nowhere.at.all"
        ).save()


def test_sink_reports_a_row_whose_subject_no_stream_captures(
    spark, single_target: JetStreamTarget, sink_stream: str
) -> None:  # type: ignore[no-untyped-def]
    df = spark.createDataFrame(
        [("sink.ok", "1"), ("lost.subject", "2")], "subject string, data string"
    ).coalesce(1)
    with pytest.raises(Exception, match="no stream captures the subject"):
        df.write.format("jetstream").mode("append").option("servers", single_target.servers).save()


def test_subject_column_overrides_the_subject_option(  # type: ignore[no-untyped-def]
    spark, single_target: JetStreamTarget, sink_stream: str
) -> None:
    rows = [("sink.override.a", "1"), (None, "2"), ("sink.override.b", "3"), (None, "4")]
    df = spark.createDataFrame(rows, "subject string, data string").coalesce(1)
    df.write.format("jetstream").mode("append").option("servers", single_target.servers).option(
        "subject", "sink.override.default"
    ).save()
    stored = (
        read_stream(spark, single_target, sink_stream)
        .where("subject like 'sink.override.%'")
        .select("subject", "data")
        .collect()
    )
    got = sorted((row.subject, row.data.decode()) for row in stored)
    assert got == [
        ("sink.override.a", "1"),
        ("sink.override.b", "3"),
        ("sink.override.default", "2"),
        ("sink.override.default", "4"),
    ]


async def headers_seen_by_nats_py(servers: list[str], subject: str, count: int) -> list[dict[str, str]]:
    """Headers of the first `count` messages on `subject`, read with nats-py's ordered consumer."""
    nc = await nats.connect(servers)
    try:
        sub = await nc.jetstream().subscribe(subject, ordered_consumer=True)
        headers = []
        for _ in range(count):
            msg = await sub.next_msg(timeout=10)
            headers.append(dict(msg.headers or {}))
        await sub.unsubscribe()
        return headers
    finally:
        await nc.close()


def test_string_headers_map_reaches_the_stream(  # type: ignore[no-untyped-def]
    spark, single_target: JetStreamTarget, sink_stream: str
) -> None:
    schema = StructType(
        [
            StructField("data", StringType()),
            StructField("headers", MapType(StringType(), StringType())),
        ]
    )
    rows = [(f"h-{i}", {"X-Index": str(i), "X-Kind": "plain"} if i % 2 == 0 else None) for i in range(6)]
    spark.createDataFrame(rows, schema).coalesce(1).write.format("jetstream").mode("append").option(
        "servers", single_target.servers
    ).option("subject", "sink.hdr").save()

    seen = run(headers_seen_by_nats_py(single_target.urls, "sink.hdr", len(rows)))
    assert all(h["Nats-Msg-Id"].startswith("spark:") for h in seen)
    assert [{k: v for k, v in h.items() if k.startswith("X-")} for h in seen] == [
        {"X-Index": str(i), "X-Kind": "plain"} if i % 2 == 0 else {} for i in range(6)
    ]
