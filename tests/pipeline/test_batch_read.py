"""Batch reads through Spark from a 3-node R3 stream with allow_direct."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pyarrow as pa
import pytest
from nats.js.api import StreamConfig

from tests.pipeline.servers import JetStreamTarget
from tests.pipeline.streams import Published, create_stream, publish, run

MESSAGES = 100_000
SUBJECTS = 7


def order_message(i: int) -> tuple[str, bytes, tuple[tuple[str, str], ...]]:
    headers: tuple[tuple[str, str], ...] = ()
    if i % 10 == 0:
        headers = (("X-Order", str(i)), ("X-Tag", "a"), ("X-Tag", "b"))
    return f"orders.{i % SUBJECTS}", f"order-{i}-".encode() + bytes([i % 251]) * (i % 40), headers


@pytest.fixture(scope="module")
def orders(cluster_target: JetStreamTarget) -> list[Published]:
    config = StreamConfig(name="ORDERS", subjects=["orders.>"], num_replicas=3, allow_direct=True)
    run(create_stream(cluster_target.urls, config))
    return run(publish(cluster_target.urls, MESSAGES, order_message))


@pytest.fixture(scope="module")
def orders_table(spark, cluster_target: JetStreamTarget, orders: list[Published]) -> pa.Table:  # type: ignore[no-untyped-def]
    df = (
        spark.read.format("jetstream")
        .option("servers", cluster_target.servers)
        .option("stream", "ORDERS")
        .option("partitions", "6")
        .load()
    )
    return df.toArrow()


def grouped(headers: tuple[tuple[str, str], ...]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in headers:
        out.setdefault(name, []).append(value)
    return out


def test_batch_read_equals_what_was_published(orders: list[Published], orders_table: pa.Table) -> None:
    assert orders_table.num_rows == MESSAGES
    rows = orders_table.to_pydict()
    assert rows["seq"] == sorted(rows["seq"]), "partitions come back in sequence order"
    expected = {p.seq: p for p in orders}
    assert set(rows["seq"]) == set(expected)
    for i, seq in enumerate(rows["seq"]):
        published = expected[seq]
        assert rows["subject"][i] == published.subject
        assert rows["data"][i] == published.data
        assert dict(rows["headers"][i]) == grouped(published.headers)
    assert set(rows["stream"]) == {"ORDERS"}


def test_batch_read_times_are_publish_times(orders_table: pa.Table) -> None:
    times = orders_table.column("time").to_pylist()
    now = datetime.now(UTC)
    assert all(t is not None and t <= now for t in times)
    assert (max(times) - min(times)).total_seconds() < 600
    # The stream stamps messages in arrival order.
    assert times == sorted(times)


def test_reads_are_served_by_more_than_one_node(
    cluster_target: JetStreamTarget, orders_table: pa.Table
) -> None:
    responders = Counter(orders_table.column("responder").to_pylist())
    if not cluster_target.sends_responder:
        assert responders == {None: MESSAGES}, "nats-server does not name the responder"
        pytest.skip("needs the Jetraft-Node reply header: nats-server does not say which replica answered")
    assert None not in responders
    assert len(responders) > 1, f"every read was served by one node: {responders}"


def test_filtered_range_read(spark, cluster_target: JetStreamTarget, orders: list[Published]) -> None:  # type: ignore[no-untyped-def]
    df = (
        spark.read.format("jetstream")
        .option("servers", cluster_target.servers)
        .option("stream", "ORDERS")
        .option("subject", "orders.3")
        .option("start_seq", "1001")
        .option("end_seq", "9000")
        .option("batch_size", "50")
        .option("max_bytes", "2048")
        .option("partitions", "3")
        .load()
    )
    got = df.select("seq", "subject", "data").toArrow().to_pydict()
    want = [p for p in orders if p.subject == "orders.3" and 1001 <= p.seq <= 9000]
    assert got["seq"] == [p.seq for p in want]
    assert got["data"] == [p.data for p in want]
    assert set(got["subject"]) == {"orders.3"}
