"""Example pipeline: per-subject order totals from a stream, written into a KV bucket.

    python -m pipeline.examples.order_totals --servers nats://127.0.0.1:4222,nats://127.0.0.1:4223 \\
        --stream ORDERS --bucket order_totals [--seed 10000]

Orders are JSON messages such as `{"order": 7, "amount": 12.34}` on subjects
like `orders.eu`. The pipeline reads the stream with the `jetstream` data
source (Direct Get batches from every replica) up to the last sequence it saw
when it started, counts the orders and sums their amounts (exactly, as
decimal(18,2)) per subject, and publishes one value per subject through the
`jetstream` sink to `$KV.<bucket>.<subject>`: `{"count": 3, "total": 40.17}`.
`--seed N` first creates the stream (when missing) and publishes N sample orders.

The sink's Nats-Msg-Id prefix names the stream sequence the totals cover, so a
retried Spark task is deduplicated while a later run, over more orders, always
writes its new totals (a value equal to an older one is not mistaken for a
retry of it).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

import nats
import nats.errors
import nats.js.errors
from nats.js.api import KeyValueConfig, StreamConfig
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline.examples.publishing import publish_acknowledged
from pipeline.options import parse_servers

REGIONS = ("eu", "us", "apac", "latam", "africa")
AMOUNT_TYPE = "decimal(18,2)"
# Characters a KV key may hold (ADR-8); anything else in a subject becomes '_'.
NOT_A_KEY_CHARACTER = r"[^-/_=.a-zA-Z0-9]"
STREAM_READY_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class SampleOrder:
    subject: str
    amount: Decimal

    def payload(self, number: int) -> bytes:
        return f'{{"order": {number}, "amount": {self.amount}}}'.encode()


def sample_orders(count: int, subject_prefix: str = "orders") -> list[SampleOrder]:
    """Deterministic orders spread over a few regions, amounts from 0.01 to 999.99."""
    orders = []
    for number in range(count):
        cents = (number * 7919 + 101) % 99_999 + 1
        subject = f"{subject_prefix}.{REGIONS[(number * 31 + number // 7) % len(REGIONS)]}"
        orders.append(SampleOrder(subject, Decimal(cents).scaleb(-2)))
    return orders


def expected_totals(orders: Sequence[SampleOrder]) -> dict[str, tuple[int, Decimal]]:
    """What the pipeline computes, in plain Python: subject -> (count, total amount)."""
    totals: dict[str, tuple[int, Decimal]] = {}
    for order in orders:
        count, total = totals.get(order.subject, (0, Decimal("0.00")))
        totals[order.subject] = (count + 1, total + order.amount)
    return totals


async def _ensure_stream(js: nats.js.JetStreamContext, stream: str, subjects: str, replicas: int) -> None:
    try:
        await js.stream_info(stream)
        return
    except nats.js.errors.NotFoundError:
        pass
    await js.add_stream(
        StreamConfig(name=stream, subjects=[subjects], num_replicas=replicas, allow_direct=True)
    )
    # Publishes are refused until the stream's own group has elected a leader; STREAM.INFO says when.
    deadline = time.monotonic() + STREAM_READY_TIMEOUT
    while True:
        try:
            info = await js.stream_info(stream)
            if info.cluster is None or info.cluster.leader:
                return
        except (nats.js.errors.ServiceUnavailableError, nats.errors.TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"stream {stream} got no leader within {STREAM_READY_TIMEOUT:g}s")
        await asyncio.sleep(0.1)


async def seed_orders(
    servers: Sequence[str], stream: str, count: int, replicas: int = 3, subject_prefix: str = "orders"
) -> list[SampleOrder]:
    """Create the stream (allow_direct, `<prefix>.>`) unless it exists, then publish `count` orders."""
    orders = sample_orders(count, subject_prefix)
    nc = await nats.connect(list(servers))
    try:
        await _ensure_stream(nc.jetstream(timeout=30), stream, f"{subject_prefix}.>", replicas)
        await publish_acknowledged(nc, count, lambda i: (orders[i].subject, orders[i].payload(i)))
    finally:
        await nc.close()
    return orders


async def ensure_bucket(servers: Sequence[str], bucket: str, replicas: int = 3) -> None:
    """Create the KV bucket unless it exists (the sink only publishes to its `$KV.<bucket>.>` subjects)."""
    nc = await nats.connect(list(servers))
    try:
        js = nc.jetstream(timeout=10)
        try:
            await js.key_value(bucket)
        except nats.js.errors.BucketNotFoundError:
            await js.create_key_value(KeyValueConfig(bucket=bucket, replicas=replicas))
    finally:
        await nc.close()


async def stream_last_seq(servers: Sequence[str], stream: str) -> int:
    nc = await nats.connect(list(servers))
    try:
        info = await nc.jetstream(timeout=10).stream_info(stream)
        return int(info.state.last_seq)
    finally:
        await nc.close()


def order_totals(orders: DataFrame) -> DataFrame:
    """Rows of the jetstream source -> (subject, count, total); orders without an amount count, add 0."""
    amount = F.get_json_object(F.col("data").cast("string"), "$.amount").cast(AMOUNT_TYPE)
    return orders.groupBy("subject").agg(
        F.count(F.lit(1)).alias("count"),
        F.coalesce(F.sum(amount), F.lit(0).cast(AMOUNT_TYPE)).cast(AMOUNT_TYPE).alias("total"),
    )


def kv_messages(totals: DataFrame, bucket: str) -> DataFrame:
    """(subject, count, total) -> the sink's (subject, data): one KV put per order subject."""
    key = F.regexp_replace(F.col("subject"), NOT_A_KEY_CHARACTER, "_")
    return totals.select(
        F.concat(F.lit(f"$KV.{bucket}."), key).alias("subject"),
        F.to_json(F.struct("count", "total")).alias("data"),
    )


def run_order_totals(
    spark: SparkSession,
    servers: Sequence[str],
    stream: str,
    bucket: str,
    subject_filter: str | None = None,
    replicas: int = 3,
) -> list[tuple[str, int, Decimal]]:
    """Compute the totals up to the stream's current last sequence and store them in the bucket."""
    asyncio.run(ensure_bucket(servers, bucket, replicas))
    last_seq = asyncio.run(stream_last_seq(servers, stream))
    if last_seq == 0:
        return []
    reader = (
        spark.read.format("jetstream")
        .option("servers", ",".join(servers))
        .option("stream", stream)
        .option("end_seq", str(last_seq))
    )
    if subject_filter:
        reader = reader.option("subject", subject_filter)
    # One row per subject: a single task publishes them all.
    totals = order_totals(reader.load()).coalesce(1).cache()
    try:
        kv_messages(totals, bucket).write.format("jetstream").mode("append").option(
            "servers", ",".join(servers)
        ).option("msg_id_prefix", f"order-totals.{stream}.{last_seq}").save()
        return sorted((row["subject"], row["count"], row["total"]) for row in totals.collect())
    finally:
        totals.unpersist()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.examples.order_totals",
        description="Per-subject order counts and amounts from a stream, written into a KV bucket.",
    )
    parser.add_argument("--servers", required=True, help="comma-separated NATS URLs of the cluster")
    parser.add_argument("--stream", default="ORDERS", help="stream of JSON orders (default ORDERS)")
    parser.add_argument("--bucket", default="order_totals", help="KV bucket for the totals")
    parser.add_argument("--subject", default=None, help="only orders on this subject filter")
    parser.add_argument(
        "--seed", type=int, default=0, metavar="N", help="first create the stream and publish N sample orders"
    )
    parser.add_argument(
        "--subject-prefix", default="orders", help="subjects of seeded orders: PREFIX.<region>"
    )
    parser.add_argument("--replicas", type=int, default=3, help="replicas of a stream or bucket created here")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    servers = list(parse_servers(args.servers))
    if args.seed > 0:
        started = time.perf_counter()
        asyncio.run(seed_orders(servers, args.stream, args.seed, args.replicas, args.subject_prefix))
        print(f"seeded {args.seed} orders into {args.stream} in {time.perf_counter() - started:.1f}s")
    from pipeline.examples.local_spark import local_spark_session

    spark = local_spark_session(args.master, "jetraft-order-totals")
    try:
        totals = run_order_totals(spark, servers, args.stream, args.bucket, args.subject, args.replicas)
    finally:
        spark.stop()
    for subject, count, total in totals:
        print(f"{subject:<24} {count:>10} {total:>16}")
    print(f"wrote {len(totals)} totals to KV bucket {args.bucket}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
